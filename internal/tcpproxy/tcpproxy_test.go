package tcpproxy

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// echo serves lines back on a loopback port until t ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { io.Copy(c, c); c.Close() })
		}
	})
	return ln.Addr().String()
}

// roundTrip sends a line through c and reads it back.
func roundTrip(c net.Conn) error {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

// TestCutAndRestore checks that Cut breaks open connections and refuses
// new ones, and that Restore lets new ones through again.
func TestCutAndRestore(t *testing.T) {
	t.Parallel()
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := roundTrip(open); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	p.Cut()
	if err := roundTrip(open); err == nil {
		t.Error("an open connection still works after Cut")
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		if err := roundTrip(c); err == nil {
			t.Error("a new connection works after Cut")
		}
		c.Close()
	}

	p.Restore()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatalf("a new connection after Restore: %v", err)
	}
}
