package airlock

import (
	"regexp"
	"sync"
	"time"
)

// The work board is what MCP work_move commands act on: ordered columns,
// each holding work items. Reviewers and admins manage it; agents read it
// and propose moves, which run only when a reviewer approves them.

// PrefixWorkItem starts every work item ID.
const PrefixWorkItem = "wi_"

// Board input limits, in bytes of UTF-8.
const (
	MaxColumnNameLen    = 200
	MaxWorkItemTitleLen = 200
)

// ColumnKeyPattern is the shape of a column key: short, lowercase, safe to
// put in a URL or a message without quoting surprises. It is compiled on
// first use, not at start-up: a bounded repetition compiles to a large
// program, and every process, the hook's included, would pay for it
// (docs/performance.md).
var ColumnKeyPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_-]{1,64}$`) })

// Column is one column of the work board. Position orders the columns
// (the store appends a new column after the last); Items are filled by
// Board, oldest first.
type Column struct {
	Key      string
	Name     string
	Position int
	Items    []WorkItem
}

// Validate checks a new column's key and name.
func (c Column) Validate() error {
	if c.Key == "" {
		return Invalid("key", "key is required")
	}
	if !ColumnKeyPattern().MatchString(c.Key) {
		return Invalid("key", "key must match %s: lowercase letters, digits, '_' and '-', 1 to 64 characters", ColumnKeyPattern())
	}
	return CheckText("name", c.Name, 1, MaxColumnNameLen)
}

// WorkItem is one card on the board. Version starts at 1 and grows by one
// with every change, so a writer can refuse to overwrite a change it has
// not seen (WorkItemPatch.IfVersion).
type WorkItem struct {
	ID        string
	Title     string
	ColumnKey string
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Validate checks a new work item's title and column key (that the column
// exists is the store's to check).
func (w WorkItem) Validate() error {
	if err := CheckText("title", w.Title, 1, MaxWorkItemTitleLen); err != nil {
		return err
	}
	return checkColumnKey("column_key", w.ColumnKey)
}

// WithDefaults returns w with a fresh "wi_" ID when it has none. Stores
// call it before they insert.
func (w WorkItem) WithDefaults() WorkItem {
	if w.ID == "" {
		w.ID = NewID(PrefixWorkItem)
	}
	return w
}

// ColumnTaken is the error of a new column whose key another column has.
func ColumnTaken(key string) *Error {
	return Invalid("key", "column key %q is already taken; choose another", key)
}

// NoColumn is the error of a work item put in a column that does not
// exist.
func NoColumn(key string) *Error {
	return Invalid("column_key", "column %q does not exist; see the board for the column keys", key)
}

// WorkItemPatch changes a work item: the fields that are set. IfVersion,
// when not 0, makes the change apply only to that version.
type WorkItemPatch struct {
	ID        string
	Title     *string
	ColumnKey *string
	IfVersion int
}

// Validate checks a patch on its own.
func (p WorkItemPatch) Validate() error {
	if p.Title == nil && p.ColumnKey == nil {
		return Invalid("", "nothing to change: send title, column_key or both")
	}
	if p.Title != nil {
		if err := CheckText("title", *p.Title, 1, MaxWorkItemTitleLen); err != nil {
			return err
		}
	}
	if p.ColumnKey != nil {
		if err := checkColumnKey("column_key", *p.ColumnKey); err != nil {
			return err
		}
	}
	if p.IfVersion < 0 {
		return Invalid("if_version", "if_version must be a version the item had (1 or more), or 0 for any")
	}
	return nil
}

// Lost is the error of p when its compare-and-set changed nothing although
// the item exists: cur is the item as it is now. Either IfVersion is not
// its version, or the destination column does not exist; failing both, the
// item was created after the compare-and-set looked.
func (p WorkItemPatch) Lost(cur WorkItem) *Error {
	switch {
	case p.IfVersion != 0 && cur.Version != p.IfVersion:
		return Invalid("if_version", "work item %s is at version %d, not %d: read it again and retry", p.ID, cur.Version, p.IfVersion)
	case p.ColumnKey != nil:
		return NoColumn(*p.ColumnKey)
	default:
		return Errorf(CodeNotFound, "work item %s was created while it was being updated; read it and retry", p.ID)
	}
}

func checkColumnKey(field, key string) error {
	if key == "" {
		return Invalid(field, "%s is required", field)
	}
	if !ColumnKeyPattern().MatchString(key) {
		return Invalid(field, "%s must be a column key (%s)", field, ColumnKeyPattern())
	}
	return nil
}

// CanReadBoard reports whether c may read the work board: every role.
func CanReadBoard(c Caller) bool {
	return c.ID != "" && c.Role.Valid()
}

// CanWriteBoard reports whether c may change the work board directly:
// reviewers and admins. Agents change it only through approved commands.
func CanWriteBoard(c Caller) bool {
	return c.ID != "" && (c.Role == RoleReviewer || c.Role == RoleAdmin)
}

// Audit event types of the work board. Subject names the column key or
// the work item ID.
const (
	EventColumnCreated   EventType = "column.created"
	EventWorkItemCreated EventType = "work_item.created"
	EventWorkItemUpdated EventType = "work_item.updated"
	// EventWorkItemMoved is appended when an approved work_move command
	// moves an item; its RequestID names the request.
	EventWorkItemMoved EventType = "work_item.moved"
)
