package postgres

import (
	"embed"
	"fmt"
	"strings"
	"sync"

	"github.com/airlockhq/airlock/store/sqlcore"
)

// sqlFiles are the store's statements as SQL, one file per concern
// (sqlcore.LoadStatements reads them).
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// statements are the store's SQL, concern by concern, with the events
// lock's keys still the arguments eventsLockArgs. They are read on first
// use, so that no airlock process (a hook's, say) pays for them at start.
var statements = sync.OnceValue(func() *sqlcore.Statements {
	q, err := sqlcore.LoadStatements(sqlFiles, "sql/*.sql", map[string]string{
		"grantState": sqlcore.GrantStateBeforeClock + "tick.now" + sqlcore.GrantStateAfterClock,
		"grantLive":  sqlcore.GrantLiveBeforeClock + "tick.now" + sqlcore.GrantLiveAfterClock,
		"eventsLock": eventsLockArgs,
	})
	if err != nil {
		panic(err) // the embedded files are the package's own: any test finds this
	}
	return q
})

// eventsLockArgs are the keys of the schema's events lock in a statement
// that appends its own events; statementsFor puts the store's in.
const eventsLockArgs = "@class, @lock"

// statementsFor returns the statements of a store whose schema's events
// lock has the key eventsLock: the package's, with the lock's keys in the
// statements that append their own events.
func statementsFor(eventsLock int32) *sqlcore.Statements {
	q := *statements()
	keys := fmt.Sprintf("%d, %d", advisoryClass, eventsLock)
	q.Requests.CreatePending = strings.ReplaceAll(q.Requests.CreatePending, eventsLockArgs, keys)
	q.Requests.DecideOnce = strings.ReplaceAll(q.Requests.DecideOnce, eventsLockArgs, keys)
	return &q
}
