package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ConsumeInput is what ConsumeApprovalToken hands the server: the
// approval token and, to hold it to the call about to run, the tool and
// the arguments as received (both, or neither).
type ConsumeInput struct {
	Token string
	Tool  string
	Args  json.RawMessage
	// Audience must equal the token's aud; both may be empty.
	Audience string
}

// TokenUse is the server's record of the one use of an approval token's
// request.
type TokenUse struct {
	RequestID  string    `json:"request_id"`
	JTI        string    `json:"jti"`
	ConsumedAt time.Time `json:"consumed_at"`
}

// ConsumeApprovalToken has the server verify an approval token against
// its own keys and record its single use (docs/tokens.md, "Single use"),
// with a verifier (or admin) token. The first consume of a request's
// token succeeds; every later one, on any replica, is an *Error for which
// IsAlreadyUsed is true, its ConsumedAt the first's time. A token that
// does not verify is CodeInvalidToken, its Reason saying why. It is not
// retried on network errors: a retry after a lost answer would be told
// already_used. An answer without the request's ID and the time, or for
// another token than the one sent, is an *AnswerError and not believed.
func (c *Client) ConsumeApprovalToken(ctx context.Context, in ConsumeInput) (*TokenUse, error) {
	body, err := json.Marshal(struct {
		Token     string          `json:"token"`
		Tool      string          `json:"tool,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Audience  string          `json:"audience,omitempty"`
	}{in.Token, in.Tool, in.Args, in.Audience})
	if err != nil {
		return nil, fmt.Errorf("consume approval token: %w", err)
	}
	cl := call{method: http.MethodPost, path: "/v1/approval-tokens/consume", body: body}
	use, err := fetch[TokenUse](ctx, c, cl)
	if err != nil {
		return nil, err
	}
	if reason := use.unbelievable(in.Token); reason != "" {
		return nil, &AnswerError{Method: cl.method, Path: cl.path, Status: http.StatusOK, Reason: reason}
	}
	return use, nil
}

// unbelievable says what is wrong with a consume's answer for token, ""
// when nothing is: it must name the request and the token's jti, as the
// token itself does (read unverified: the server verified it), and when.
func (u *TokenUse) unbelievable(token string) string {
	var claims struct {
		Subject string `json:"sub"`
		ID      string `json:"jti"`
	}
	_ = decodeClaims(token, &claims) // a token the server accepted decodes; if not, the comparison fails
	switch {
	case u.RequestID == "":
		return "it names no request"
	case u.ConsumedAt.IsZero():
		return "it does not say when the token was consumed"
	case u.RequestID != claims.Subject || u.JTI != claims.ID:
		return fmt.Sprintf("it is the use of request %s (jti %s), not of the token sent (request %s, jti %s)", u.RequestID, u.JTI, claims.Subject, claims.ID)
	}
	return ""
}

// decodeClaims reads a compact JWS's payload into v, unverified.
func decodeClaims(token string, v any) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a compact JWS")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
