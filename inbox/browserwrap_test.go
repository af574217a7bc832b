package inbox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
	"github.com/chromedp/chromedp"
)

// lastVisibleJS finds the last occurrence of a marker character in an
// element's text and reports, measured by the browser's layout, whether
// that character is inside the element's box and inside the visible part
// of every ancestor that clips (overflow other than visible), and not
// beyond the page's left or right edge. It returns "" when it is, else
// what is wrong.
const lastVisibleJS = `(function (sel, marker) {
  var el = document.querySelector(sel);
  if (!el) return 'no element ' + sel;
  var walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT), node, found = null, at = -1;
  while ((node = walk.nextNode())) {
    var i = node.data.lastIndexOf(marker);
    if (i >= 0) { found = node; at = i; }
  }
  if (!found) return 'no ' + marker + ' in ' + sel;
  var range = document.createRange();
  range.setStart(found, at);
  range.setEnd(found, at + marker.length);
  var rects = range.getClientRects();
  if (rects.length === 0) return sel + ': the character is not laid out';
  var c = rects[rects.length - 1];
  if (c.width === 0 || c.height === 0) return sel + ': the character has no size';
  var inside = function (box, what) {
    if (c.left < box.left - 0.5 || c.right > box.right + 0.5 || c.top < box.top - 0.5 || c.bottom > box.bottom + 0.5) {
      return sel + ': the character at ' + JSON.stringify([c.left, c.top, c.right, c.bottom]) + ' is outside ' + what + ' ' + JSON.stringify([box.left, box.top, box.right, box.bottom]);
    }
    return '';
  };
  var problem = inside(el.getBoundingClientRect(), 'its box');
  if (problem) return problem;
  for (var a = el; a && a !== document.documentElement; a = a.parentElement) {
    var st = getComputedStyle(a);
    if (st.display === 'none' || st.visibility === 'hidden') return sel + ': hidden by ' + a.tagName;
    if (st.overflowX !== 'visible' || st.overflowY !== 'visible') {
      var r = a.getBoundingClientRect();
      var box = { left: r.left + a.clientLeft, top: r.top + a.clientTop };
      box.right = box.left + a.clientWidth; box.bottom = box.top + a.clientHeight;
      problem = inside(box, 'the clipping ' + a.tagName + '.' + a.className);
      if (problem) return problem;
    }
  }
  var page = document.documentElement.clientWidth;
  if (c.left < 0 || c.right > page + 0.5) return sel + ': the character is beyond the page edge (' + page + ' px)';
  if (document.documentElement.scrollWidth > page) return 'the page scrolls sideways: ' + document.documentElement.scrollWidth + ' px';
  return '';
})`

// lastVisible fails the test unless the last marker in the element is
// inside its laid-out, visible box.
func (tb *tab) lastVisible(selector, marker string) {
	tb.t.Helper()
	if problem := eval[string](tb, fmt.Sprintf("%s(%q, %q)", lastVisibleJS, selector, marker)); problem != "" {
		tb.t.Errorf("%s: %s", tb.location(), problem)
	}
}

// TestBrowserLongStringsWrap: a 10 kB string argument and a 300-character
// unbroken token are shown whole, wrapped: the last character of each is
// inside its laid-out, visible box, at phone (390 px) and desktop
// (1440 px) widths, on the request page, the pending list and the history.
func TestBrowserLongStringsWrap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter-"+strings.Repeat("n", 150)+"Ň")
	long := "BEGIN; CREATE TABLE users_backup AS SELECT * FROM users; " + strings.Repeat("DROP TABLE users CASCADE; ", 400) + "Ω"
	token := strings.Repeat("x", 299) + "Ж"
	id := b.toolCall(t, inst, "run_sql", map[string]any{"statement": long, "token": token}, strings.Repeat("y", 299)+"Ц "+strings.Repeat("reason ", 1400)+"Ѣ")
	if n := len(long); n < 10_000 {
		t.Fatalf("the long string is %d bytes, want 10 kB", n)
	}
	mcp := b.mcp(t, provider.MCPRequestInput{Title: strings.Repeat("t", 198) + "Ŧ", Description: strings.Repeat("d", 299) + "Đ"})
	decided := b.toolCall(t, inst, "run_sql", map[string]any{"statement": token}, "")
	if _, err := b.svc.Decide(context.Background(), b.callers["Dan (reviewer)"], decided, airlock.DecisionInput{Status: airlock.StateDenied, Note: strings.Repeat("z", 299) + "Ž"}); err != nil {
		t.Fatal(err)
	}

	tb := b.signedInTab(t, b.reviewer)
	tb.phoneAndDesktop(t, func(t *testing.T, _ int64) {
		tb.open("/requests/" + id)
		tb.do(chromedp.Click(chromedp.ID("reasoning-more"))) // a long claim folds; unfolded, it is whole
		tb.lastVisible("#reasoning", "Ѣ")
		tb.lastVisible("#arguments", "Ω")
		tb.lastVisible("#arguments", "Ж")
		tb.lastVisible("#reasoning", "Ц")
		tb.lastVisible(`section[aria-labelledby="source-h"]`, "Ň")
		tb.open("/requests/" + mcp.ID)
		tb.lastVisible("#req-h", "Ŧ")
		tb.lastVisible("#description", "Đ")
		tb.open("/")
		tb.lastVisible(`.row[data-id="`+mcp.ID+`"] .headline`, "Ŧ")
		tb.lastVisible(`.row[data-id="`+id+`"] .from`, "Ň")
		tb.open("/requests/" + decided)
		tb.lastVisible("#decision-note", "Ž")
		tb.open("/history")
		tb.lastVisible(`.row[data-id="`+decided+`"] .row-note`, "Ž")
	})
}

// TestBrowserPendingRowSummaries: a pending row shows, besides the tool,
// one line of its arguments, visibly shortened, and the instance's name,
// so that two calls of one tool can be told apart; at 390 and 1440 px.
func TestBrowserPendingRowSummaries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	crm := b.instance(t, "crm-adapter")
	mail := b.instance(t, "mail-adapter")
	ana := b.toolCall(t, crm, "send_email", map[string]any{"to": "ana@example.com", "subject": "Your refund"}, "")
	ben := b.toolCall(t, mail, "send_email", map[string]any{"to": "ben@example.com", "subject": "Your refund"}, "")
	long := b.toolCall(t, mail, "send_email", map[string]any{"to": "all@example.com", "body": strings.Repeat("word ", 200)}, "")

	tb := b.signedInTab(t, b.reviewer)
	tb.phoneAndDesktop(t, func(t *testing.T, width int64) {
		tb.open("/")
		row := func(id string) string { return `.row[data-id="` + id + `"]` }
		if a, b := tb.text(row(ana)+" .row-args"), tb.text(row(ben)+" .row-args"); a == b || !contains(a, "ana@example.com") || !contains(b, "ben@example.com") {
			t.Errorf("the two send_email rows read %q and %q", a, b)
		}
		if got := tb.text(row(ana) + " .from"); got != "from crm-adapter" {
			t.Errorf("row instance %q", got)
		}
		if got := tb.text(row(ben) + " .from"); got != "from mail-adapter" {
			t.Errorf("row instance %q", got)
		}
		args := row(long) + " .row-args"
		if got := tb.text(args); !strings.HasSuffix(got, "…") || len([]rune(got)) > argsSummaryLen+1 {
			t.Errorf("long arguments summarized as %q, want at most %d characters and a closing …", got, argsSummaryLen)
		}
		// One line; where it does not fit, the browser's ellipsis marks the cut.
		state := eval[string](tb, `(function () { var e = document.querySelector('`+args+`'), s = getComputedStyle(e);
				var lines = Math.round(e.getBoundingClientRect().height / parseFloat(s.lineHeight === 'normal' ? 1.2 * parseFloat(s.fontSize) : s.lineHeight));
				if (lines !== 1) return 'lines ' + lines;
				if (e.scrollWidth > e.clientWidth && s.textOverflow !== 'ellipsis') return 'cut without a marker';
				return ''; })()`)
		if state != "" {
			t.Errorf("the summary line: %s", state)
		}
		if w := eval[int](tb, "document.documentElement.scrollWidth"); w > int(width) {
			t.Errorf("the list scrolls sideways: %d px", w)
		}
	})
}

// TestBrowserNestedArgumentsOnPhone: deeply nested arguments keep their
// structure at 390 px: every line keeps its indentation, the block scrolls
// sideways inside itself (the page does not), and a short string such as
// "rm -rf /" is never broken across two lines.
func TestBrowserNestedArgumentsOnPhone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "ops-adapter")
	var args any = map[string]any{"command": "rm -rf /", "cwd": "/srv/app"}
	for _, key := range []string{"step", "then", "on_success", "with", "options", "run", "plan", "job"} {
		args = map[string]any{key: args}
	}
	id := b.toolCall(t, inst, "orchestrate", args.(map[string]any), "")

	tb := b.signedInTab(t, b.reviewer)
	tb.viewport(390, 844, chromedp.EmulateMobile)
	tb.open("/requests/" + id)
	state := eval[map[string]any](tb, `(function () {
  var pre = document.getElementById('arguments');
  var walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT), node, range = null;
  var token = '"rm -rf /"';
  while ((node = walk.nextNode())) {
    var i = node.data.indexOf(token);
    if (i >= 0) { range = document.createRange(); range.setStart(node, i); range.setEnd(node, i + token.length); }
  }
  var tops = [];
  if (range) Array.prototype.forEach.call(range.getClientRects(), function (r) { if (tops.indexOf(Math.round(r.top)) < 0) tops.push(Math.round(r.top)); });
  var lines = pre.textContent.split('\n');
  var deepest = lines.filter(function (l) { return l.indexOf('"command"') >= 0; })[0] || '';
  return {
    found: range !== null, tokenLines: tops.length,
    scrollWidth: pre.scrollWidth, clientWidth: pre.clientWidth,
    pageWidth: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth,
    indent: deepest.length - deepest.replace(/^ +/, '').length,
    hint: !document.getElementById('arguments-wide').hidden
  };
})()`)
	if state["found"] != true {
		t.Fatalf(`"rm -rf /" is not in the arguments block: %v`, state)
	}
	if n := state["tokenLines"].(float64); n != 1 {
		t.Errorf(`"rm -rf /" is laid out on %v lines, want 1`, n)
	}
	if sw, cw := state["scrollWidth"].(float64), state["clientWidth"].(float64); sw <= cw {
		t.Errorf("the arguments block does not scroll sideways: scrollWidth %v, clientWidth %v", sw, cw)
	}
	if pw, vw := state["pageWidth"].(float64), state["viewport"].(float64); pw > vw {
		t.Errorf("the page scrolls sideways: %v px wide in a %v px viewport", pw, vw)
	}
	if n := state["indent"].(float64); n != 18 {
		t.Errorf(`the "command" line is indented %v spaces, want 18 (nine levels)`, n)
	}
	if state["hint"] != true {
		t.Error("no hint says the block scrolls sideways")
	}
}
