package policy

import (
	"context"

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
