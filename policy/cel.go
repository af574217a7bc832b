package policy

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// CostLimit bounds a match expression's estimated cost, in CEL's cost
// units (about one per operation; a string scan costs a tenth of its
// length): at load, an expression whose estimated worst case is over it
// is refused. At evaluation, EvalTimeout bounds the rules' time instead:
// CEL's run-time cost tracking grows with the square of a loop's length
// in this version, so that it would itself be the slow part.
const CostLimit = 1_000_000

// EvalTimeout bounds the evaluation of all the rules for one request. A
// rule still running then stops with an error, and asks a person. Loops
// check it every hundred iterations.
const EvalTimeout = 100 * time.Millisecond

// estimateSize is the size the load-time estimate gives to a string, list
// or map whose size only the request knows: a request's arguments may be a
// mebibyte, but a bound that large would refuse any loop over them, so the
// estimate judges an expression's shape, and the run-time limit its
// actual cost.
const estimateSize = 1 << 16

// The object types of the three variables a match expression sees, with
// their fields' types. At evaluation the values are maps with these keys.
var objectTypes = map[string]map[string]*types.Type{
	"airlock.Request": {
		"tool":      types.StringType,
		"arguments": types.DynType,
		"kind":      types.StringType,
		"title":     types.StringType,
		"context":   types.DynType,
		"timeout":   types.DurationType,
		// reversibility is the adapter's claim: "reversible",
		// "partial", "irreversible", or "" when it said nothing.
		"reversibility": types.StringType,
	},
	"airlock.Instance": {
		"id":       types.StringType,
		"name":     types.StringType,
		"metadata": types.DynType,
	},
	"airlock.Agent": {
		"id":        types.StringType,
		"name":      types.StringType,
		"principal": types.StringType,
		"scopes":    types.NewListType(types.StringType),
	},
}

// typeProvider declares objectTypes to the type checker, so that a
// misspelt field (request.tol) or a comparison of the wrong types
// (request.tool > 4) is refused at load rather than asking at every
// request. Values are read from maps by the interpreter.
type typeProvider struct {
	types.Provider
}

func (p typeProvider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := objectTypes[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Provider.FindStructType(name)
}

func (p typeProvider) FindStructFieldNames(name string) ([]string, bool) {
	if fields, ok := objectTypes[name]; ok {
		names := make([]string, 0, len(fields))
		for f := range fields {
			names = append(names, f)
		}
		slices.Sort(names)
		return names, true
	}
	return p.Provider.FindStructFieldNames(name)
}

func (p typeProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	fields, ok := objectTypes[name]
	if !ok {
		return p.Provider.FindStructFieldType(name, field)
	}
	t, ok := fields[field]
	if !ok {
		return nil, false
	}
	return &types.FieldType{
		Type:    t,
		IsSet:   func(o any) bool { m, ok := o.(map[string]any); _, set := m[field]; return ok && set },
		GetFrom: func(o any) (any, error) { m, _ := o.(map[string]any); return m[field], nil },
	}, true
}

// NewValue refuses to build the three object types in an expression:
// they describe a request, they are not values a rule makes.
func (p typeProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := objectTypes[name]; ok {
		return types.NewErr("%s cannot be constructed in a policy", name)
	}
	return p.Provider.NewValue(name, fields)
}

var (
	envOnce sync.Once
	envVal  *cel.Env
	envErr  error
)

// environment is the CEL environment every rule is compiled in: the
// standard library, the string extensions, and request, instance and
// agent.
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		reg, err := types.NewRegistry()
		if err != nil {
			envErr = err
			return
		}
		envVal, envErr = cel.NewEnv(
			cel.CustomTypeProvider(typeProvider{Provider: reg}),
			cel.Variable("request", cel.ObjectType("airlock.Request")),
			cel.Variable("instance", cel.ObjectType("airlock.Instance")),
			cel.Variable("agent", cel.ObjectType("airlock.Agent")),
			cel.CrossTypeNumericComparisons(true),
			ext.Strings(),
		)
	})
	return envVal, envErr
}

// sizeEstimator gives the load-time cost estimate its sizes.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: estimateSize}
}

func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// compiled is a rule's match expression, ready to run.
type compiled struct {
	prg cel.Program
	// loops tells whether the expression has a comprehension (all, exists,
	// map, filter): only those run long enough to need EvalTimeout's
	// check, which costs a context per evaluation.
	loops bool
	// reads is which of the request's JSON documents the expression may
	// read, so that a request is decoded only for rules that look.
	reads documents
}

// documents are the request's decoded JSON documents, which cost a parse
// per request: its arguments and its context.
type documents struct {
	arguments, context bool
}

func (d documents) or(e documents) documents {
	return documents{arguments: d.arguments || e.arguments, context: d.context || e.context}
}

// documentsRead finds which documents an expression may read. A field
// selected on request by name says which; request used any other way
// (request["arguments"], a whole-request comparison, a loop variable of
// that name) may read either, so it counts as both.
func documentsRead(e celast.Expr) documents {
	var (
		d                 documents
		idents, selectors int
	)
	celast.PostOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			if e.AsIdent() == "request" {
				idents++
			}
		case celast.SelectKind:
			sel := e.AsSelect()
			if op := sel.Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == "request" {
				selectors++
				d.arguments = d.arguments || sel.FieldName() == "arguments"
				d.context = d.context || sel.FieldName() == "context"
			}
		}
	}))
	if idents > selectors {
		return documents{arguments: true, context: true}
	}
	return d
}

// compile checks a rule's match expression: it must parse, type-check,
// yield a boolean and stay under CostLimit.
func compile(r Rule) (compiled, error) {
	env, err := environment()
	if err != nil {
		return compiled{}, fmt.Errorf("policy environment: %w", err)
	}
	ast, iss := env.Compile(r.Match)
	if iss.Err() != nil {
		return compiled{}, fmt.Errorf("match does not compile: %s", iss.Err())
	}
	if !ast.OutputType().IsExactType(types.BoolType) {
		return compiled{}, fmt.Errorf("match must be a boolean expression, not %s (compare it: request.arguments.force == true)", ast.OutputType())
	}
	est, err := env.EstimateCost(ast, sizeEstimator{})
	if err != nil {
		return compiled{}, fmt.Errorf("match: estimating its cost: %w", err)
	}
	if est.Max > CostLimit {
		return compiled{}, fmt.Errorf("match may cost up to %d, over the limit of %d: avoid loops within loops over the arguments", est.Max, CostLimit)
	}
	prg, err := env.Program(ast, cel.InterruptCheckFrequency(100), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return compiled{}, fmt.Errorf("match: %w", err)
	}
	loops := false
	celast.PostOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.ComprehensionKind {
			loops = true
		}
	}))
	return compiled{prg: prg, loops: loops, reads: documentsRead(ast.NativeRep().Expr())}, nil
}
