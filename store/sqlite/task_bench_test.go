package sqlite_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
)

// BenchmarkTaskBytes measures what an open MCP task costs on disk: 10,000
// approval_prompt tasks (with a small call) on pending requests, the file
// (after its WAL is checkpointed at close) compared with the file before
// the tasks. It reports bytes/task; b.N is not used.
func BenchmarkTaskBytes(b *testing.B) {
	const n = 10_000
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "airlock.db")
	size := func() int64 {
		var total int64
		for _, p := range []string{path, path + "-wal"} {
			if fi, err := os.Stat(p); err == nil {
				total += fi.Size()
			}
		}
		return total
	}
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	in, err := st.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_agent", Name: "bench"}, "tok_agent")
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		key := airlock.NewID("key_")
		r, _, err := st.CreateRequest(ctx, store.NewRequestParams{Request: airlock.Request{
			ID: airlock.NewID(airlock.PrefixRequest), InstanceID: in.ID, OwnerID: in.OwnerID, Kind: airlock.KindToolCall,
			Tool: "Bash", Arguments: json.RawMessage(`{"command":"ls"}`), Timeout: "10m", IdempotencyKey: key, Fingerprint: "fp_" + key,
		}, Window: 10 * time.Minute, Actor: in.OwnerID})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	st.Close()
	before := size()
	st, err = sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	for _, id := range ids {
		if _, err := st.CreateTask(ctx, store.Task{ID: airlock.NewID("tsk_"), RequestID: id, Owner: "tok_agent",
			Kind: store.TaskApprovalPrompt, Call: json.RawMessage(`{"tool_use_id":"toolu_01ABCDEFGHIJKLMNOPQRSTUV"}`)}); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	b.ReportMetric(float64(size()-before)/n, "bytes/task")
}
