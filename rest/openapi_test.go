package rest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestOpenAPIListsExactlyTheRoutes checks that every route the handler
// registers is in the document, and every operation of the document is
// served.
func TestOpenAPIListsExactlyTheRoutes(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	var served []string
	for _, rt := range routes {
		served = append(served, rt.pattern)
	}
	slices.Sort(documented)
	slices.Sort(served)
	for _, s := range served {
		if !slices.Contains(documented, s) {
			t.Errorf("route %q is served but not in openapi.yaml", s)
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			t.Errorf("operation %q is in openapi.yaml but not served", d)
		}
	}
	if len(served) != len(documented) {
		t.Errorf("%d routes served, %d documented", len(served), len(documented))
	}
}

// TestOpenAPIDocumentsEveryCode checks the Problem schema's code enum is
// the domain's closed set, and that each code maps to a status.
func TestOpenAPIDocumentsEveryCode(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	var enum []string
	for _, v := range doc.Components.Schemas["Code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	var codes []string
	for _, c := range airlock.Codes {
		codes = append(codes, string(c))
		if statuses[c] == 0 || titles[c] == "" {
			t.Errorf("code %s has no HTTP status or title", c)
		}
	}
	slices.Sort(enum)
	slices.Sort(codes)
	if !slices.Equal(enum, codes) {
		t.Errorf("Code enum %v, domain codes %v", enum, codes)
	}
	for _, s := range airlock.States {
		if !slices.Contains(doc.Components.Schemas["State"].Value.Enum, any(string(s))) {
			t.Errorf("state %s missing from the State schema", s)
		}
	}
}

// TestOpenAPIListsEveryEventType checks the Event schema's type enum is
// exactly the EventType constants the domain package declares, read from
// its source so a new event type cannot be forgotten here.
func TestOpenAPIListsEveryEventType(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	var enum []string
	for _, v := range doc.Components.Schemas["Event"].Value.Properties["type"].Value.Enum {
		enum = append(enum, v.(string))
	}
	// The domain package's files, parsed one by one (parser.ParseDir is
	// deprecated).
	names, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var declared []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "airlock" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Values) != 1 {
				return true
			}
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "EventType" {
				return true
			}
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, _ := strconv.Unquote(lit.Value)
				declared = append(declared, v)
			}
			return true
		})
	}
	if len(declared) < 20 {
		t.Fatalf("found only %d EventType constants in the domain package; the parse is wrong", len(declared))
	}
	slices.Sort(enum)
	slices.Sort(declared)
	if !slices.Equal(enum, declared) {
		t.Errorf("Event type enum %v\nthe domain's event types %v", enum, declared)
	}
}

// TestOpenAPIServed checks /openapi.yaml serves the embedded document
// without a token.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, req{method: "GET", path: "/openapi.yaml"})
	want(t, r, http.StatusOK, "")
	if string(r.body) != string(OpenAPI) {
		t.Fatalf("served document differs from the embedded one")
	}
	if !strings.HasPrefix(string(r.body), "openapi: 3.1.0") {
		t.Fatalf("document does not start with openapi: 3.1.0")
	}
}
