package rest

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestTypeScriptTypesMatchOpenAPI holds the TypeScript SDK's resource
// types (sdk/typescript/src/types.ts, written by hand) to this document:
// each interface has exactly the properties of its schema, so a field the
// API gains or loses fails here until the SDK follows.
func TestTypeScriptTypesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	src, err := os.ReadFile("../sdk/typescript/src/types.ts")
	if err != nil {
		t.Fatal(err)
	}
	ifaces := typeScriptInterfaces(string(src))
	// The interface each schema is typed as, where the names differ.
	renamed := map[string]string{
		"CreateApprovalRequest":  "CreateRequestInput",
		"CreateGrant":            "CreateGrantInput",
		"CreateToken":            "CreateTokenInput",
		"CreateWebhook":          "CreateWebhookInput",
		"CreatePushSubscription": "CreatePushSubscriptionInput",
		"ApprovalRequestPage":    "RequestPage",
		"ConsumeApprovalToken":   "ConsumeInput",
	}
	checked := 0
	for name, ref := range doc.Components.Schemas {
		s := ref.Value
		if s == nil || len(s.Properties) == 0 {
			continue
		}
		iface := name
		if r, ok := renamed[name]; ok {
			iface = r
		}
		fields, ok := ifaces[iface]
		if !ok {
			continue // not a resource the SDK types (lists, hook payloads)
		}
		checked++
		var want []string
		for p := range s.Properties {
			want = append(want, p)
		}
		slices.Sort(want)
		if !slices.Equal(fields, want) {
			t.Errorf("sdk/typescript/src/types.ts: interface %s has %v; the %s schema has %v", iface, fields, name, want)
		}
	}
	if checked < 15 {
		t.Errorf("only %d interfaces matched a schema; want the API's resources", checked)
	}
}

// typeScriptInterfaces reads each exported interface's property names,
// sorted, with those of the interface it extends (less those it omits).
func typeScriptInterfaces(src string) map[string][]string {
	decl := regexp.MustCompile(`(?ms)^export interface (\w+)(?: extends (?:Omit<)?(\w+)(?:, ((?:'\w+'(?: \| )?)+)>)?)? \{\n(.*?)^\}`)
	prop := regexp.MustCompile(`(?m)^  (\w+)\??:`)
	own := map[string][]string{}
	parent := map[string]string{}
	omitted := map[string][]string{} // what an interface omits of its parent (Omit<P, 'a' | 'b'>)
	for _, m := range decl.FindAllStringSubmatch(src, -1) {
		for _, p := range prop.FindAllStringSubmatch(m[4], -1) {
			own[m[1]] = append(own[m[1]], p[1])
		}
		parent[m[1]] = m[2]
		for _, k := range regexp.MustCompile(`'(\w+)'`).FindAllStringSubmatch(m[3], -1) {
			omitted[m[1]] = append(omitted[m[1]], k[1])
		}
	}
	out := map[string][]string{}
	for name := range own {
		fields := slices.Clone(own[name])
		for n := name; parent[n] != ""; n = parent[n] {
			for _, f := range own[parent[n]] {
				if !slices.Contains(omitted[n], f) {
					fields = append(fields, f)
				}
			}
		}
		slices.Sort(fields)
		out[name] = slices.Compact(fields)
	}
	return out
}
