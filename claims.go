package airlock

// The context an adapter may attach to a tool call (docs/protocol.md,
// "What the adapter claims"): a preview of the call's effect and how
// reversible it is. Both are the adapter's claims, shown beside the facts
// (the tool and the exact arguments) and never instead of them; nothing
// checks them.

// Preview is an adapter's rendering of what a call would do: a diff (a
// unified diff of a file the call writes, say) or plain text.
type Preview struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// Preview types.
const (
	PreviewDiff = "diff"
	PreviewText = "text"
)

// MaxPreviewBytes bounds a preview's content.
const MaxPreviewBytes = 32 << 10

// Reversibility values: how far a call's effect can be undone, as the
// adapter claims.
const (
	Reversible   = "reversible"
	Partial      = "partial"
	Irreversible = "irreversible"
)

// AdapterClaim labels, on every surface, what an adapter claims about a
// call it did not run: its preview and reversibility.
const AdapterClaim = "The adapter's claim (unverified)"

// CheckPreview refuses a preview no surface shows: an unknown type, or
// content that is empty, over MaxPreviewBytes or not text.
func CheckPreview(p *Preview) error {
	if p == nil {
		return nil
	}
	if p.Type != PreviewDiff && p.Type != PreviewText {
		return Invalid("preview", "preview.type must be \"diff\" or \"text\", not %q", p.Type)
	}
	return CheckText("preview", p.Content, 1, MaxPreviewBytes)
}

// CheckReversibility refuses an unknown reversibility ("" is none).
func CheckReversibility(s string) error {
	switch s {
	case "", Reversible, Partial, Irreversible:
		return nil
	}
	return Invalid("reversibility", "reversibility must be reversible, partial or irreversible, not %q", s)
}
