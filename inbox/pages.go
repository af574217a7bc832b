package inbox

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/confusables"
	"github.com/airlockhq/airlock/internal/display"
	"github.com/airlockhq/airlock/provider"
)

// row is one request in a list.
type row struct {
	ID          string
	Kind        airlock.Kind
	State       airlock.State
	Headline    []display.Segment // the tool for tool calls, the title for MCP requests
	Tool        []display.Segment // the tool or command method, when there is one
	Instance    []display.Segment
	InstanceID  string
	Created     time.Time
	CreatedAgo  string
	Deadline    time.Time
	Left        string
	IsQuestion  bool
	IsCommand   bool
	Note        []display.Segment
	Answer      []display.Segment
	DecidedBy   string            // the decider's ID, secondary detail
	DecidedName []display.Segment // who decided, as people read it
	DecidedAt   time.Time
	HasDecision bool
	Owner       []display.Segment // the name of the agent token that asked
	OwnerID     string
	// From names who asked (airlock.Requester): a tool call's instance,
	// an MCP request's agent and session.
	From []display.Segment
	// AgentWrote marks a request described in the agent's own words (an
	// MCP request's title, description and question), labelled as its
	// claim wherever it shows.
	AgentWrote bool
	// Args is a one-line summary of the arguments, ending in "…" when
	// shortened, so that two calls of one tool can be told apart.
	Args []display.Segment
	// LookAlike marks a history search hit found only through look-alike
	// characters (a confusable skeleton).
	LookAlike bool
	// For names the reviewer groups the request is for, when routed.
	For []display.Segment
	// Quorum says how far a request needing several approvals has come:
	// "1 of 2 approvals" in a list, with who approved on its page.
	Quorum string
}

// argsSummaryLen is how many characters of the arguments a row shows at
// most, on one line.
const argsSummaryLen = 120

// argsSummary is the arguments' start on one line: runs of white space
// become one space, and a visible "…" says when more follows.
func argsSummary(head string, cut bool) string {
	line := strings.Join(strings.Fields(head), " ")
	if r := []rune(line); len(r) > argsSummaryLen {
		line, cut = string(r[:argsSummaryLen]), true
	}
	if cut {
		line += "…"
	}
	return line
}

// names maps instance and session IDs to their names, for lists.
func (h *handler) names(ctx context.Context, c airlock.Caller) map[string]string {
	out := map[string]string{}
	if ins, err := h.svc.Instances(ctx, c); err == nil {
		for _, in := range ins {
			out[in.ID] = in.Name
		}
	}
	if ss, err := h.svc.Sessions(ctx, c); err == nil {
		for _, s := range ss {
			out[s.ID] = s.Name
		}
	}
	return out
}

// row is what a list shows of a request: a summary is all it needs.
func (h *handler) row(r airlock.RequestSummary, names map[string]string, now time.Time) row {
	out := row{
		ID: r.ID, Kind: r.Kind, State: r.State, InstanceID: r.InstanceID,
		Created: r.CreatedAt, CreatedAgo: ago(now, r.CreatedAt), Deadline: r.DeadlineAt, Left: left(now, r.DeadlineAt),
		IsQuestion: r.Question != nil, IsCommand: r.CommandMethod != "",
	}
	if r.Tool != "" {
		out.Tool = display.Line(r.Tool)
	}
	if r.Title != "" {
		out.Headline = display.Line(r.Title)
	} else {
		out.Headline = display.Line(r.Tool)
	}
	instance, owner := cmp.Or(r.InstanceName, names[r.InstanceID], r.InstanceID), cmp.Or(r.OwnerName, r.OwnerID)
	out.Instance = display.Line(instance)
	out.Owner, out.OwnerID = display.Line(owner), r.OwnerID
	out.From = display.Line(airlock.Requester(r.Kind, instance, owner, r.SessionID != ""))
	out.AgentWrote = r.Kind.AgentWrote()
	switch {
	case r.Purged:
		out.Args = display.Line("(arguments purged)")
	case r.ArgumentsHead != "":
		out.Args = display.Line(argsSummary(r.ArgumentsHead, r.ArgumentsCut))
	}
	if len(r.Reviewers) > 0 {
		out.For = display.Line(strings.Join(r.Reviewers, ", "))
	}
	if r.Approvals > 1 {
		out.Quorum = fmt.Sprintf("%d of %d approvals", r.ApprovedVotes, r.Approvals)
	}
	if d := r.Decision; d != nil {
		out.HasDecision = true
		out.Note = display.Text(d.Note)
		out.Answer = display.Text(d.Answer)
		out.DecidedBy = d.DecidedBy
		out.DecidedName = display.Line(cmp.Or(d.DecidedByName, d.DecidedBy))
		out.DecidedAt = d.DecidedAt
	}
	return out
}

// option is one entry of a filter's select.
type option struct {
	Value    string
	Label    []display.Segment
	Selected bool
}

// pendingBody is the pending list page's data.
type pendingBody struct {
	Rows      []row
	Count     int
	More      bool // more pending than one page shows
	Filtered  bool
	Kinds     []option
	Tool      string
	Instances []option
	Sessions  []option
	Query     string // the filters as a query string, for the live stream
	Problem   string
	// Selectable offers each row's checkbox for "Review selected" (a
	// batch decision): reviewers only.
	Selectable bool
}

// pendingFilter reads the list's filters from the query string.
type pendingFilter struct {
	kind, tool, instance, session string
}

func readFilter(q url.Values) pendingFilter {
	return pendingFilter{
		kind: strings.TrimSpace(q.Get("kind")), tool: strings.TrimSpace(q.Get("tool")),
		instance: strings.TrimSpace(q.Get("instance")), session: strings.TrimSpace(q.Get("session")),
	}
}

func (f pendingFilter) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"kind": f.kind, "tool": f.tool, "instance": f.instance, "session": f.session} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

// pendingRows lists the pending requests the filter selects, oldest
// deadline first: what needs a decision soonest is on top. It reads
// summaries, so a page of requests with large arguments costs what it
// shows.
func (h *handler) pendingRows(ctx context.Context, c airlock.Caller, f pendingFilter) (pendingBody, error) {
	var body pendingBody
	lq := provider.ListQuery{State: airlock.StatePending, Kind: airlock.Kind(f.kind), Tool: f.tool, Limit: provider.MaxPageSize}
	switch {
	case f.instance != "" && f.session != "" && f.instance != f.session:
		body.Problem = "An instance and a different session were both chosen: a request belongs to one of them. Clear one filter."
		return body, nil
	case f.instance != "":
		lq.InstanceID = f.instance
	case f.session != "":
		lq.InstanceID = f.session
	}
	page, err := h.svc.ListSummaries(ctx, c, lq)
	if err != nil {
		if e := airlock.ErrorCode(err); e == airlock.CodeInvalidRequest {
			body.Problem = err.Error()
			return body, nil
		}
		return body, err
	}
	names := h.names(ctx, c)
	now := h.now()
	for _, r := range page.Summaries {
		body.Rows = append(body.Rows, h.row(r, names, now))
	}
	slices.SortStableFunc(body.Rows, func(a, b row) int { return a.Deadline.Compare(b.Deadline) })
	body.Count = len(body.Rows)
	body.Selectable = c.Role == airlock.RoleReviewer
	body.More = page.NextCursor != ""
	body.Filtered = f != pendingFilter{}
	body.Query = f.query()
	return body, nil
}

func (h *handler) pending(w http.ResponseWriter, r *http.Request) {
	v, release, ok := h.signedInHeavy(w, r)
	if !ok {
		return
	}
	defer release()
	f := readFilter(r.URL.Query())
	body, err := h.pendingRows(r.Context(), v.caller, f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body.Tool = f.tool
	body.Kinds = append(body.Kinds, option{Value: "", Label: display.Line("Any kind"), Selected: f.kind == ""})
	for _, k := range airlock.Kinds {
		body.Kinds = append(body.Kinds, option{Value: string(k), Label: display.Line(kindName(k)), Selected: f.kind == string(k)})
	}
	body.Instances = []option{{Value: "", Label: display.Line("Any instance"), Selected: f.instance == ""}}
	body.Sessions = []option{{Value: "", Label: display.Line("Any session"), Selected: f.session == ""}}
	if ins, err := h.svc.Instances(r.Context(), v.caller); err == nil {
		for _, in := range ins {
			if in.Kind == airlock.InstanceSession {
				continue
			}
			body.Instances = append(body.Instances, option{Value: in.ID, Label: display.Line(in.Name + " (" + in.ID + ")"), Selected: f.instance == in.ID})
		}
	}
	if ss, err := h.svc.Sessions(r.Context(), v.caller); err == nil {
		for _, s := range ss {
			if s.ClosedAt != nil && f.session != s.ID {
				continue
			}
			body.Sessions = append(body.Sessions, option{Value: s.ID, Label: display.Line(s.Name + " (" + s.ID + ")"), Selected: f.session == s.ID})
		}
	}
	h.render(w, r, http.StatusOK, v, "pending", "Pending", body)
}

// voteRow is one vote as the request page lists it.
type voteRow struct {
	Name   []display.Segment
	Status airlock.State
	Note   []display.Segment
	At     time.Time
	Review *airlock.ReviewClaim // the voter's client's claim
	// Passkey names the passkey the vote was signed with, empty for
	// none.
	Passkey []display.Segment
}

// passkeyLabel is how a history names the passkey a decision was signed
// with: its name while it exists, else the start of its credential ID.
func passkeyLabel(p provider.PasskeySignature) string {
	if p.Name != "" {
		return p.Name
	}
	id := airlock.PasskeyIDString(p.CredentialID)
	if len(id) > 12 {
		id = id[:12] + "…"
	}
	return id
}

// requestBody is the request page's data.
type requestBody struct {
	row
	Pending   bool
	CanDecide bool
	// NeedsPasskey: a decision must be signed with the reviewer's passkey
	// (--require-passkey-for, docs/phone.md).
	NeedsPasskey bool
	// NotForYou is set for a reviewer outside the groups a pending
	// request is for: the page is read-only and says why.
	NotForYou    bool
	Votes        []voteRow
	OwnRequest   bool
	Title        []display.Segment
	Description  []display.Segment
	TargetType   []display.Segment
	TargetID     []display.Segment
	SessionID    string
	ProposalMode string
	Arguments    []jsonPiece
	HasArguments bool
	// PurgedAt is when the payload retention purged the arguments,
	// reasoning and context: the page says so where they would be.
	PurgedAt *time.Time
	ArgsSize string // the arguments' size in bytes, for people: "1,234 bytes"
	// Digest is the arguments' args_digest, as an approval token carries
	// it (argsDigest).
	Digest string
	// ArgsLines counts the arguments' lines as shown; ArgsLong offers
	// "Jump to the end" for arguments longer than a screen.
	ArgsLines   int
	ArgsLong    bool
	Reasoning   []display.Segment
	Context     []jsonPiece
	Timeout     string
	Preview     []display.Segment // a command in plain words
	PreviewNote string            // what has changed since, if anything
	Choices     []option
	FreeText    bool
	Validities  []option
	// Grants are the "approve and allow the same for …" choices, for a
	// tool call a grant may cover; empty otherwise.
	Grants   []option
	Warnings []string
	Decision *airlock.Decision
	// DecPasskey names the passkey the decision was signed with, ""
	// for none.
	DecPasskey []display.Segment
	DecNote    []display.Segment
	DecAnswer  []display.Segment
	ValidUntil string
	Execution  *airlock.Execution
	ExecDetail []display.Segment
	Command    *airlock.CommandResult
	CmdDetail  []display.Segment
	// CanEdit offers "Edit and approve" (a pending tool call the viewer
	// may decide); EditSeed is the exact arguments the editor starts
	// from, InputSchema the tool's input schema when the request
	// carries one (the editor checks against it).
	CanEdit     bool
	EditSeed    string
	InputSchema string
	// Edit links an edit's two requests, with their diff.
	Edit *editLink
	// Claimed is what the adapter claims about the call (its preview and
	// reversibility), shown as its claim beside the facts; nil for none.
	Claimed *adapterClaims
}

func (h *handler) request(w http.ResponseWriter, r *http.Request) {
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	req, err := h.svc.Request(r.Context(), v.caller, r.PathValue("id"), 0)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body := h.requestBody(r.Context(), v, req)
	title := display.Join(body.Headline)
	if len(title) > 80 {
		title = title[:80] + "…"
	}
	h.render(w, r, http.StatusOK, v, "request", title, body)
}

// Arguments longer than this many lines or bytes are long: their page
// offers "Jump to the end" (docs/inbox.md, "Seeing all of it").
const (
	longArgsLines = 30
	longArgsBytes = 2048
)

func (h *handler) requestBody(ctx context.Context, v *view, req airlock.Request) requestBody {
	now := h.now()
	b := requestBody{
		row:     h.row(req.Summary(), h.names(ctx, v.caller), now),
		Pending: req.State == airlock.StatePending,
		Title:   display.Line(req.Title), Description: display.Text(req.Description),
		TargetType: display.Line(req.TargetType), TargetID: display.Line(req.TargetID), SessionID: req.SessionID,
		Reasoning: display.Text(req.AgentReasoning), Timeout: req.Timeout,
		PurgedAt: req.PurgedAt,
	}
	b.CanDecide = b.Pending && h.svc.MayDecide(v.caller, req)
	if b.CanDecide {
		// A condition that cannot be judged asks for the passkey: the
		// decision's own check refuses alike.
		need, err := h.svc.PasskeyRequired(ctx, req)
		b.NeedsPasskey = need || err != nil
	}
	b.NotForYou = b.Pending && v.caller.Role == airlock.RoleReviewer && !b.CanDecide
	if req.NeedsQuorum() {
		b.Quorum = req.QuorumProgress()
		for _, vt := range req.Votes {
			b.Votes = append(b.Votes, voteRow{Name: display.Line(vt.Name), Status: vt.Status, Note: display.Text(vt.Note), At: vt.At, Review: vt.Review})
		}
	}
	signed, err := h.svc.PasskeySignatures(ctx, req)
	if err != nil {
		// The page still shows the request; the history lacks the marks.
		h.log.Warn("inbox: passkey signatures", "request", req.ID, "err", err)
	}
	for _, p := range signed {
		for i, vt := range req.Votes {
			if i < len(b.Votes) && vt.Principal == p.Principal {
				b.Votes[i].Passkey = display.Line(passkeyLabel(p))
			}
		}
		if d := req.Decision; d != nil && d.DecidedBy == p.Actor {
			b.DecPasskey = display.Line(passkeyLabel(p))
		}
	}
	if req.Proposal != nil {
		b.ProposalMode = req.Proposal.Mode
	}
	if len(req.Arguments) > 0 {
		b.HasArguments = true
		b.Arguments = jsonPieces(req.Arguments)
		b.ArgsSize = byteCount(len(req.Arguments))
		b.Digest = argsDigest(req.Arguments)
		for _, p := range b.Arguments {
			b.ArgsLines += strings.Count(display.Join(p.Text), "\n")
		}
		b.ArgsLines++
		b.ArgsLong = b.ArgsLines > longArgsLines || len(req.Arguments) > longArgsBytes
	}
	if len(req.Context) > 0 {
		b.Context = jsonPieces(req.Context)
	}
	for _, s := range []string{req.Title, req.TargetID, req.TargetType, string(req.Arguments), string(req.Context)} {
		if w := display.LookAlike(s); w != "" && !slices.Contains(b.Warnings, w) {
			b.Warnings = append(b.Warnings, w)
		}
	}
	if cmd := req.Proposal; cmd != nil && cmd.Command != nil && cmd.Command.Method == airlock.MethodWorkMove {
		b.Preview, b.PreviewNote = h.workMovePreview(ctx, v.caller, cmd.Command)
	}
	if q := req.Question; q != nil {
		b.FreeText = len(q.Choices) == 0
		for _, c := range q.Choices {
			b.Choices = append(b.Choices, option{Value: c, Label: display.Line(c)})
		}
	}
	b.Validities = h.validities()
	if req.Kind == airlock.KindToolCall && req.MayApproveAtCreation() && len(req.Reviewers) == 0 && !req.NeedsQuorum() {
		b.Grants = grantChoices
	}
	if d := req.Decision; d != nil {
		b.Decision = d
		b.DecNote = display.Text(d.Note)
		b.DecAnswer = display.Text(d.Answer)
		if d.ExpiresAt != nil {
			b.ValidUntil = d.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC")
			if now.Before(*d.ExpiresAt) {
				b.ValidUntil += " (" + strings.TrimSuffix(left(now, *d.ExpiresAt), " left") + " from now)"
			} else {
				b.ValidUntil += " (lapsed)"
			}
		}
	}
	if e := req.Execution; e != nil {
		b.Execution = e
		b.ExecDetail = display.Text(e.Detail)
	}
	if b.CanDecide && req.CheckEditable() == nil && req.PurgedAt == nil {
		b.CanEdit, b.EditSeed = true, editSeed(req.Arguments)
		if s := inputSchema(req); s != nil {
			b.InputSchema = string(s)
		}
	}
	b.Edit = h.editOf(ctx, v, req)
	b.Claimed = claimsOf(req)
	if cr := req.CommandResult; cr != nil {
		b.Command = cr
		b.CmdDetail = display.Text(cr.Detail)
	}
	return b
}

// workMovePreview says a work_move in plain words, with the board's column
// names, and notes when approving would fail (display.WorkMove).
func (h *handler) workMovePreview(ctx context.Context, c airlock.Caller, cmd *airlock.Command) ([]display.Segment, string) {
	board, err := h.svc.Board(ctx, c)
	switch {
	case err != nil:
		board = nil // unknown: no note either way
	case board == nil:
		board = []airlock.Column{} // read, and empty: the item is gone
	}
	text, note := display.WorkMove(cmd.Input, cmd.Observed, board)
	return display.Line(text), note
}

// historyBody is the history page's data.
type historyBody struct {
	Rows       []row
	Q          string
	States     []option
	NextCursor string
	NextQuery  string
	Scanned    int
}

// historyScan bounds how many requests one history page reads while
// searching, so a search with few matches still answers quickly; the page
// offers to continue from where it stopped.
const historyScan = 1000

// historyScanPages bounds, likewise, the bytes of arguments and other
// large fields (airlock.Request.StoredBytes) one search reads, counted in
// pages of provider.Config.ListPageBytes: 16 of 4 MiB, 64 MiB, by default.
// A thousand requests of a mebibyte each would take seconds.
const historyScanPages = 16

// historySearchPageBytes is the size of the pages a search reads: it
// looks at one request at a time, so smaller pages than a REST list's let
// several searches at once hold little (docs/operations.md, "Memory").
const historySearchPageBytes = 1 << 20

// historyPage is how many matches one history page shows.
const historyPage = 100

func (h *handler) history(w http.ResponseWriter, r *http.Request) {
	v, release, ok := h.signedInHeavy(w, r)
	if !ok {
		return
	}
	defer release()
	q := r.URL.Query()
	body := historyBody{Q: strings.TrimSpace(q.Get("q"))}
	state := airlock.State(q.Get("state"))
	if state != "" && (!state.Valid() || state == airlock.StatePending) {
		state = ""
	}
	body.States = []option{{Value: "", Label: display.Line("Any outcome"), Selected: state == ""}}
	for _, s := range airlock.States[1:] {
		body.States = append(body.States, option{Value: string(s), Label: display.Line(string(s)), Selected: state == s})
	}
	names := h.names(r.Context(), v.caller)
	now := h.now()
	needle := strings.ToLower(body.Q)
	cursor := q.Get("cursor")
	read, maxRead := 0, historyScanPages*h.svc.ListPageBytes() // bytes of large fields searched
	for body.Scanned < historyScan && len(body.Rows) < historyPage && read < maxRead {
		page, err := h.historyCandidates(r.Context(), v.caller, provider.ListQuery{State: state, Cursor: cursor, Limit: provider.MaxPageSize}, names, needle)
		if airlock.ErrorCode(err) == airlock.CodeInvalidRequest {
			cursor = ""
			break
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		read += page.bytes
		for i, c := range page.candidates {
			body.Scanned++
			if c.State == airlock.StatePending || !c.matches {
				continue
			}
			rw := h.row(c.RequestSummary, names, now)
			rw.LookAlike = c.lookAlike
			body.Rows = append(body.Rows, rw)
			if len(body.Rows) == historyPage && i < len(page.candidates)-1 {
				// Continue after this one next time.
				page.next = provider.CursorAfter(c.Seq)
				break
			}
		}
		cursor = page.next
		if cursor == "" {
			break
		}
	}
	if cursor != "" {
		body.NextCursor = cursor
		next := url.Values{"cursor": {cursor}}
		if body.Q != "" {
			next.Set("q", body.Q)
		}
		if state != "" {
			next.Set("state", string(state))
		}
		body.NextQuery = next.Encode()
	}
	h.render(w, r, http.StatusOK, v, "history", "History", body)
}

// candidate is a request the history considered, as a list shows it, and
// whether it matches the search.
type candidate struct {
	airlock.RequestSummary
	matches   bool
	lookAlike bool // matched only by its confusable skeleton
}

// candidates is one page of them.
type candidates struct {
	candidates []candidate
	next       string // the cursor after the page; empty on the last
	bytes      int    // the large fields read for the search
}

// historyCandidates reads one page of the history's candidates. With
// nothing to search for, it reads summaries; a search reads whole requests,
// since it looks into their arguments too, a page of at most
// provider.Config.ListPageBytes of them, and keeps only their summaries.
func (h *handler) historyCandidates(ctx context.Context, c airlock.Caller, q provider.ListQuery, names map[string]string, needle string) (candidates, error) {
	var out candidates
	if needle == "" {
		page, err := h.svc.ListSummaries(ctx, c, q)
		for _, s := range page.Summaries {
			out.candidates = append(out.candidates, candidate{RequestSummary: s, matches: true})
		}
		out.next = page.NextCursor
		return out, err
	}
	s := newSearch(needle)
	q.PageBytes = historySearchPageBytes
	page, err := h.svc.ListRequests(ctx, c, q)
	for _, r := range page.Requests {
		m := noMatch
		if r.State != airlock.StatePending {
			m = s.matches(r, names)
		}
		out.candidates = append(out.candidates, candidate{RequestSummary: r.Summary(), matches: m != noMatch, lookAlike: m == lookAlikes})
		out.bytes += r.StoredBytes()
	}
	out.next = page.NextCursor
	return out, err
}

// match is how a request matched a search.
type match int

const (
	noMatch    match = iota
	textMatch        // a text contains the search
	lookAlikes       // only a text's confusable skeleton contains the search's
)

// search is what the history looks for: the text, lower case, and its
// confusable skeleton (Unicode TS #39), so that "paypal" also finds
// "pаypal" with a Cyrillic а.
type search struct {
	needle, skeleton string
}

func newSearch(q string) search {
	n := strings.ToLower(q)
	return search{needle: n, skeleton: confusables.Skeleton(n)}
}

// matches reports how a request's texts match s. The short texts go
// first: the arguments, up to a mebibyte, are lowered only when nothing
// else matched, and skeletons are computed only when no text matched.
func (s search) matches(r airlock.Request, names map[string]string) match {
	texts := []string{r.ID, r.Tool, r.Title, r.Description, r.AgentReasoning, r.InstanceID, names[r.InstanceID], r.InstanceName, r.OwnerName, string(r.Kind), string(r.State)}
	if d := r.Decision; d != nil {
		texts = append(texts, d.Note, d.Answer, d.DecidedBy, d.DecidedByName)
	}
	for _, t := range texts {
		if containsMapped(t, s.needle, strings.ToLower) {
			return textMatch
		}
	}
	if containsMapped(r.Arguments, s.needle, strings.ToLower) {
		return textMatch
	}
	for _, t := range texts {
		if containsMapped(t, s.skeleton, lowerSkeleton) {
			return lookAlikes
		}
	}
	if containsMapped(r.Arguments, s.skeleton, lowerSkeleton) {
		return lookAlikes
	}
	return noMatch
}

func lowerSkeleton(t string) string { return confusables.Skeleton(strings.ToLower(t)) }

// searchPiece is how much of a text is lowered or skeletonised at once.
// A search runs over arguments of up to a mebibyte on several requests at
// a time, and a skeleton of a whole mebibyte allocates several times its
// size; pieces keep what a search holds small (docs/operations.md,
// "Memory").
const searchPiece = 64 << 10

// containsMapped reports whether mapping(text) contains needle, mapping
// text a piece at a time. A piece ends only before an ASCII byte: lowering
// and the confusable skeleton (decompose, map each rune, decompose again)
// treat an ASCII character as a starter that nothing reorders across, so
// the mapping of the whole is the mappings of the pieces, one after the
// other. The last len(needle)-1 bytes of what is mapped carry over, so a
// match across two pieces is found. The arguments are searched as the
// bytes they are, so that a mebibyte is not copied to be searched.
func containsMapped[T ~string | ~[]byte](text T, needle string, mapping func(string) string) bool {
	if needle == "" {
		return true
	}
	if len(text) <= searchPiece {
		return strings.Contains(mapping(string(text)), needle)
	}
	carry := ""
	for len(text) > 0 {
		cut := min(searchPiece, len(text))
		for cut < len(text) && text[cut] >= utf8.RuneSelf {
			cut++
		}
		mapped := carry + mapping(string(text[:cut]))
		if strings.Contains(mapped, needle) {
			return true
		}
		text = text[cut:]
		carry = mapped[max(0, len(mapped)-(len(needle)-1)):]
	}
	return false
}

// sessionRow is one session on the sessions page.
type sessionRow struct {
	ID       string
	ShowID   bool // the name does not already say the ID
	Name     []display.Segment
	Status   airlock.SessionStatus
	Owner    []display.Segment // the agent token's name
	OwnerID  string
	Pending  int
	Opened   time.Time
	LastSeen string
	Closed   string
}

// sessionGroup is the sessions of one status.
type sessionGroup struct {
	Status   airlock.SessionStatus
	Heading  string
	Hint     string
	Sessions []sessionRow
}

func (h *handler) sessionsPage(w http.ResponseWriter, r *http.Request) {
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	ss, err := h.svc.Sessions(r.Context(), v.caller)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	now := h.now()
	owners := make([]string, 0, len(ss))
	for _, s := range ss {
		owners = append(owners, s.OwnerID)
	}
	tokenNames, err := h.svc.TokenNames(r.Context(), v.caller, owners)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	groups := []sessionGroup{
		{Status: airlock.SessionWaiting, Heading: "Waiting for a decision", Hint: "A request of theirs is pending."},
		{Status: airlock.SessionActive, Heading: "Active", Hint: "Heartbeating, nothing pending."},
		{Status: airlock.SessionStale, Heading: "Stale", Hint: "No heartbeat for " + shortDuration(h.svc.StaleAfter()) + " or more: the agent may be gone. Display only: nothing is cancelled."},
		{Status: airlock.SessionClosed, Heading: "Closed", Hint: "Closed by the agent; their pending requests were cancelled."},
	}
	for _, s := range ss {
		st := h.svc.SessionStatus(s)
		sr := sessionRow{ID: s.ID, ShowID: !strings.Contains(s.Name, s.ID), Name: display.Line(s.Name), Status: st, Owner: display.Line(cmp.Or(tokenNames[s.OwnerID], s.OwnerID)), OwnerID: s.OwnerID, Pending: s.PendingCount, Opened: s.CreatedAt, LastSeen: "never"}
		if s.LastSeenAt != nil {
			sr.LastSeen = ago(now, *s.LastSeenAt)
		}
		if s.ClosedAt != nil {
			sr.Closed = ago(now, *s.ClosedAt)
		}
		for i := range groups {
			if groups[i].Status == st {
				groups[i].Sessions = append(groups[i].Sessions, sr)
			}
		}
	}
	h.render(w, r, http.StatusOK, v, "sessions", "Sessions", groups)
}

// boardColumn is one column on the board page.
type boardColumn struct {
	Key   string
	Name  []display.Segment
	Items []boardItem
}

// boardItem is one work item, with the pending moves proposed for it.
type boardItem struct {
	ID      string
	Title   []display.Segment
	Version int
	Updated string
	Moves   []string // IDs of pending work_move requests for it
}

func (h *handler) board(w http.ResponseWriter, r *http.Request) {
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	cols, err := h.svc.Board(r.Context(), v.caller)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	moves := map[string][]string{}
	if page, err := h.svc.ListRequests(r.Context(), v.caller, provider.ListQuery{State: airlock.StatePending, Tool: airlock.MethodWorkMove, Limit: provider.MaxPageSize}); err == nil {
		for _, req := range page.Requests {
			if mv, err := airlock.ParseWorkMove(req.Arguments); err == nil {
				moves[mv.ItemID] = append(moves[mv.ItemID], req.ID)
			}
		}
	}
	now := h.now()
	var out []boardColumn
	for _, c := range cols {
		bc := boardColumn{Key: c.Key, Name: display.Line(c.Name)}
		for _, it := range c.Items {
			bc.Items = append(bc.Items, boardItem{ID: it.ID, Title: display.Line(it.Title), Version: it.Version, Updated: ago(now, it.UpdatedAt), Moves: moves[it.ID]})
		}
		out = append(out, bc)
	}
	h.render(w, r, http.StatusOK, v, "board", "Board", out)
}
