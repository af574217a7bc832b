package fatigue

import (
	"fmt"
	"testing"

	"github.com/airlockhq/airlock/store"
)

// BenchmarkSuggester measures the patterns' work on 100,000 decided calls
// like BenchmarkHistory's: 50 tools, arguments of two keys, one of them
// new each time.
func BenchmarkSuggester(b *testing.B) {
	calls := make([]store.DecidedRequest, 100_000)
	for i := range calls {
		state := "approved"
		if i%10 >= 7 {
			state = "denied"
		}
		calls[i] = store.DecidedRequest{ID: fmt.Sprint("apr_", i), InstanceID: "ins_1", Tool: fmt.Sprint("tool_", i%50), State: "approved",
			DecidedBy: fmt.Sprint("tok_reviewer_", i%20), Arguments: fmt.Appendf(nil, `{"path":"/srv/%d","n":%d}`, i%1000, i)}
		calls[i].State = "approved"
		if state == "denied" {
			calls[i].State = "denied"
		}
	}
	for b.Loop() {
		var sg Suggester
		for _, c := range calls {
			sg.Add(c)
		}
		sg.Suggestions(DefaultMinApprovals)
	}
}
