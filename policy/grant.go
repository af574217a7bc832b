package policy

import (
	"context"
	"sync"

	"github.com/airlockhq/airlock"
)

// Expression is a grant's CEL match expression, compiled in the
// environment policy rules are: the same variables (request, instance,
// agent), the same checks at compile time and the same limits.
type Expression struct {
	c compiled
}

// CompileExpression compiles a grant's match expression: it must parse,
// type-check, yield a boolean and stay under CostLimit.
func CompileExpression(expr string) (*Expression, error) {
	c, err := compile(Rule{Match: expr})
	if err != nil {
		return nil, err
	}
	return &Expression{c: c}, nil
}

// Matches evaluates the expression against a new request, within
// EvalTimeout. An error is no match: a grant that cannot judge a request
// does not cover it, and a person is asked.
func (e *Expression) Matches(ctx context.Context, in airlock.PolicyInput) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, EvalTimeout)
	defer cancel()
	r := compiledRule{compiled: e.c}
	return r.eval(ctx, newActivation(ctx, in, e.c.reads))
}

// Expressions compiles grants' match expressions for the provider
// (airlock.GrantExpressions), keeping those it compiled by their text: a
// grant's expression never changes, and compiling costs far more than
// evaluating. Its zero value is ready to use.
type Expressions struct {
	mu sync.Mutex
	m  map[string]*Expression
}

// maxExpressions bounds the expressions Expressions keeps; it starts over
// when full.
const maxExpressions = 1024

// Compile returns expr compiled (CompileExpression), from those compiled
// before when it can.
func (x *Expressions) Compile(expr string) (airlock.GrantExpression, error) {
	x.mu.Lock()
	e, ok := x.m[expr]
	x.mu.Unlock()
	if ok {
		return e, nil
	}
	e, err := CompileExpression(expr)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	if x.m == nil || len(x.m) >= maxExpressions {
		x.m = make(map[string]*Expression)
	}
	x.m[expr] = e
	x.mu.Unlock()
	return e, nil
}
