package bench

import (
	"context"
	"net"
	"sync"
)

// pipeListener is a net.Listener whose connections are in-memory pipes
// (net.Pipe). The wait scenario uses it to reach an in-process server with
// more waiters than the process has file descriptors for: over TCP, an
// in-process server holds both ends of every connection.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the server's end of the next pipe dialled.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; pipes already made stay open.
func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr returns the pipes' address; nothing dials it (clients take dial).
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// pipeAddr is the address of a pipeListener, as net.Pipe's ends name theirs.
type pipeAddr struct{}

// Network returns "pipe".
func (pipeAddr) Network() string { return "pipe" }

// String returns "pipe".
func (pipeAddr) String() string { return "pipe" }

// dial returns the client's end of a new pipe, once the server accepted it.
func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, srv := net.Pipe()
	select {
	case l.conns <- srv:
		return client, nil
	case <-l.done:
		client.Close()
		srv.Close()
		return nil, net.ErrClosed
	case <-ctx.Done():
		client.Close()
		srv.Close()
		return nil, ctx.Err()
	}
}
