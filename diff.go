package airlock

import (
	"bytes"
	"encoding/json"
	"strings"
)

// DiffLine is one line of a diff: Op is ' ' for a line both sides have,
// '-' for one only the original has, '+' for one only the edited has.
type DiffLine struct {
	Op   byte
	Text string
}

// maxDiffCells bounds the work of a diff (lines × lines): beyond it the
// diff is every original line removed, then every edited line added,
// which is still exact, only less helpful.
const maxDiffCells = 4 << 20

// DiffLines diffs a and b by line, as a longest common subsequence.
func DiffLines(a, b string) []DiffLine {
	as, bs := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(as), len(bs)
	if n*m > maxDiffCells {
		out := make([]DiffLine, 0, n+m)
		for _, l := range as {
			out = append(out, DiffLine{'-', l})
		}
		for _, l := range bs {
			out = append(out, DiffLine{'+', l})
		}
		return out
	}
	// lcs[i][j] is the length of the longest common subsequence of
	// as[i:] and bs[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if as[i] == bs[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []DiffLine
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case as[i] == bs[j]:
			out = append(out, DiffLine{' ', as[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, DiffLine{'-', as[i]})
			i++
		default:
			out = append(out, DiffLine{'+', bs[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, DiffLine{'-', as[i]})
	}
	for ; j < m; j++ {
		out = append(out, DiffLine{'+', bs[j]})
	}
	return out
}

// ArgumentsDiff diffs two argument documents as every surface shows an
// edit: each indented by two spaces (the bytes otherwise as they are,
// keys in their order), then by line. A document that is not JSON is
// diffed as it is.
func ArgumentsDiff(original, edited []byte) []DiffLine {
	return DiffLines(indentJSON(original), indentJSON(edited))
}

func indentJSON(doc []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, doc, "", "  "); err != nil {
		return string(doc)
	}
	return b.String()
}

// Changed reports whether a diff has any line that differs.
func Changed(d []DiffLine) bool {
	for _, l := range d {
		if l.Op != ' ' {
			return true
		}
	}
	return false
}
