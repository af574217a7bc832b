package airlock_test

import (
	"testing"

	"github.com/airlockhq/airlock"
)

// benchBody is a realistic create body of about 1 KiB: a refund with line
// items, a paragraph of reasoning and some adapter context.
const benchBody = `{
  "tool": "payments.issue_refund",
  "arguments": {
    "payment_id": "pay_3MtwBwLkdIwHu7ix28a3tqPa",
    "amount": 4900,
    "currency": "GBP",
    "reason": "duplicate",
    "metadata": {"ticket": "SUP-48213", "agent": "support-bot", "locale": "en-GB"},
    "line_items": [
      {"sku": "TSHIRT-M-BLK", "quantity": 1, "unit_amount": 2450, "description": "T-shirt, black, M"},
      {"sku": "TSHIRT-M-BLK", "quantity": 1, "unit_amount": 2450, "description": "T-shirt, black, M (duplicate)"}
    ],
    "notify_customer": true,
    "idempotency_hint": null
  },
  "timeout": "PT30M",
  "agent_reasoning": "The customer was charged twice for the same order on 2026-09-14: two captures of £49.00 eleven seconds apart, same card, same basket. The order shipped once. Refunding the second capture restores the expected balance; the customer asked for this in ticket SUP-48213 and attached both bank statements.",
  "context": {
    "session_id": "session_456",
    "conversation_turn": 14,
    "user": {"id": "cus_Nf8a2", "verified": true},
    "source": "zendesk",
    "adapter": "airlock-go/1.0"
  }
}`

func BenchmarkParseCreateRequest(b *testing.B) {
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := airlock.ParseCreateRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	in, err := airlock.ParseCreateRequest([]byte(benchBody))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.Fingerprint("ins_benchmark"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseObject(b *testing.B) {
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := airlock.ParseObject(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchBodyIsRealistic keeps the benchmark honest: about 1 KiB, valid.
func TestBenchBodyIsRealistic(t *testing.T) {
	t.Parallel()
	if n := len(benchBody); n < 900 || n > 1400 {
		t.Fatalf("benchmark body is %d bytes, want about 1 KiB", n)
	}
	if _, err := airlock.ParseCreateRequest([]byte(benchBody)); err != nil {
		t.Fatal(err)
	}
}
