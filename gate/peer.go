package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A peer is one of the gate's two JSON-RPC connections (to the MCP client
// or to the upstream server) with the gate's own traffic mixed into the
// SDK session's. The SDK decodes what it reads into Go structs, which
// sorts keys, drops fields it does not know and turns error codes into
// messages; what the gate relays goes through the peer instead, as the JSON
// it arrived as:
//
//   - call sends a request in an ID space of the gate's own and takes the
//     answer off the stream before the SDK sees it: the raw result, or the
//     peer's *jsonrpc.Error with its code, message and data;
//   - requests whose method is in serve are answered by the gate, not the
//     SDK, and a notifications/cancelled for one cancels it;
//   - notifications go to onNotify first, which reports whether it took
//     them.
//
// Everything else passes to the SDK session unchanged.
//
// The SDK's stdio connection learns the negotiated protocol revision
// through an unexported method a wrapper cannot pass on; all it uses it for
// is refusing JSON-RPC batches from revision 2025-06-18 on, which a client
// of the gate may therefore still send.
type peer struct {
	mcp.Connection
	name     string // who is at the other end, for errors
	serve    map[string]servedMethod
	onNotify func(*jsonrpc.Request) bool
	// onAnswered, when set, is told of each answer written to the peer
	// (after the write, whether or not it succeeded).
	onAnswered func(*jsonrpc.Response)

	ctx    context.Context // served requests run under it; ends with the connection
	cancel context.CancelFunc
	prefix string // of the gate's own request IDs
	seq    atomic.Int64

	mu      sync.Mutex
	calls   map[jsonrpc.ID]chan *jsonrpc.Response
	served  map[jsonrpc.ID]context.CancelFunc
	err     error          // why the connection ended, once it has
	done    chan struct{}  // closed when it ends
	closing bool           // Close was called: nothing new starts
	wg      sync.WaitGroup // what spawn started (served requests among them)
}

// servedMethod answers a request of the peer from its raw params.
type servedMethod func(ctx context.Context, params json.RawMessage) (json.RawMessage, error)

// newPeer wraps conn. ctx bounds the requests the gate serves.
func newPeer(ctx context.Context, conn mcp.Connection, name, prefix string, serve map[string]servedMethod, onNotify func(*jsonrpc.Request) bool) *peer {
	c := &peer{
		Connection: conn, name: name, serve: serve, onNotify: onNotify, prefix: prefix,
		calls: map[jsonrpc.ID]chan *jsonrpc.Response{}, served: map[jsonrpc.ID]context.CancelFunc{}, done: make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	return c
}

// Read returns the next message for the SDK, handling the gate's own on
// the way.
func (c *peer) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.end(err)
			return nil, err
		}
		if !c.intercept(msg) {
			return msg, nil
		}
	}
}

// Write sends msg, then tells onAnswered of an answer.
func (c *peer) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if r, ok := msg.(*jsonrpc.Response); ok && c.onAnswered != nil {
		c.onAnswered(r)
	}
	return err
}

// intercept handles msg if it is the gate's, reporting whether it did.
func (c *peer) intercept(msg jsonrpc.Message) bool {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		c.mu.Lock()
		ch, ok := c.calls[m.ID]
		delete(c.calls, m.ID)
		c.mu.Unlock()
		if ok {
			ch <- m
			return true
		}
		// The answer to a call the gate gave up on is the gate's too.
		id, isString := m.ID.Raw().(string)
		return isString && strings.HasPrefix(id, c.prefix)
	case *jsonrpc.Request:
		if m.IsCall() {
			if h := c.serve[m.Method]; h != nil {
				c.handle(m, h)
				return true
			}
			return false
		}
		if m.Method == "notifications/cancelled" {
			return c.cancelServed(m.Params)
		}
		return c.onNotify != nil && c.onNotify(m)
	}
	return false
}

// spawn runs f in a goroutine that Close waits for, with a context that
// ends with the connection; not once Close was called.
func (c *peer) spawn(f func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closing {
		c.wg.Go(func() { f(c.ctx) })
	}
}

// handle answers req with h, unless the peer cancels it first.
func (c *peer) handle(req *jsonrpc.Request, h servedMethod) {
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	c.served[req.ID] = cancel
	c.mu.Unlock()
	c.spawn(func(context.Context) {
		defer cancel()
		res, err := h(ctx, req.Params)
		c.mu.Lock()
		delete(c.served, req.ID)
		c.mu.Unlock()
		if ctx.Err() != nil {
			return // cancelled by the peer, or the connection ended: nobody reads an answer
		}
		if err == nil && len(res) == 0 {
			res = json.RawMessage(`{}`)
		}
		c.Connection.Write(c.ctx, &jsonrpc.Response{ID: req.ID, Result: res, Error: wireError(err)})
	})
}

// cancelServed cancels the served request a notifications/cancelled names,
// reporting whether there was one.
func (c *peer) cancelServed(params json.RawMessage) bool {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return false
	}
	c.mu.Lock()
	cancel, ok := c.served[id]
	c.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// call sends a request and returns the peer's raw result, or its error as
// the *jsonrpc.Error it sent. When ctx ends first the peer is told the
// request is cancelled.
func (c *peer) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	id, err := jsonrpc.MakeID(fmt.Sprintf("%s%d", c.prefix, c.seq.Add(1)))
	if err != nil {
		return nil, err
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.closedError(method)
	}
	c.calls[id] = ch
	c.mu.Unlock()
	if err := c.Connection.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: params}); err != nil {
		c.forget(id)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: send %s to %s: %v", mcp.ErrConnectionClosed, method, c.name, err)
	}
	answer := func(resp *jsonrpc.Response) (json.RawMessage, error) {
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	}
	select {
	case resp := <-ch:
		return answer(resp)
	case <-ctx.Done():
		c.forget(id)
		reason, _ := json.Marshal(map[string]any{"requestId": id.Raw(), "reason": ctx.Err().Error()})
		c.notify(context.WithoutCancel(ctx), "notifications/cancelled", reason)
		return nil, ctx.Err()
	case <-c.done:
		select {
		case resp := <-ch: // it came with the last message
			return answer(resp)
		default:
		}
		c.forget(id)
		return nil, c.closedError(method)
	}
}

// notify sends a notification.
func (c *peer) notify(ctx context.Context, method string, params json.RawMessage) error {
	return c.Connection.Write(ctx, &jsonrpc.Request{Method: method, Params: params})
}

func (c *peer) forget(id jsonrpc.ID) {
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
}

// end records that the connection ended and stops what the gate serves.
func (c *peer) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
		c.cancel()
	}
}

func (c *peer) closedError(method string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("%w: %s ended the connection before answering %s: %v", mcp.ErrConnectionClosed, c.name, method, c.err)
}

// Close closes the connection and waits for what spawn started (the
// requests the gate serves among them), which its end cancels.
func (c *peer) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	err := c.Connection.Close()
	c.end(errors.New("closed by the gate")) // calls waiting for an answer get none
	c.wg.Wait()
	return err
}

// wireError is err as the JSON-RPC error to answer with: a peer's
// *jsonrpc.Error as it came (its code, message and data), anything else an
// internal error. Without this an error would go out with code 0.
func wireError(err error) error {
	if err == nil {
		return nil
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// rawResult is a result the gate relays as the JSON it arrived as.
type rawResult struct {
	mcp.ResultBase
	json json.RawMessage
}

// MarshalJSON returns the result as it arrived.
func (r *rawResult) MarshalJSON() ([]byte, error) {
	if len(r.json) == 0 {
		return []byte(`{}`), nil
	}
	return r.json, nil
}

// connected is a Transport whose connection already exists: the gate starts
// the upstream at once but initializes it when its client initializes.
type connected struct{ conn mcp.Connection }

func (t connected) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }
