package inbox

import (
	"bytes"
	"encoding/json"
)

// prettyJSON indents a JSON document for reading. The bytes of every
// string, number and key stay exactly as submitted; only whitespace
// between tokens changes. A document that does not indent (it cannot
// happen for stored requests, which were checked strictly) is shown as is.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
