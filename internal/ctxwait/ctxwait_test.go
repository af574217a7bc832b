package ctxwait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context = %v, want context.Canceled", err)
	}
}

func TestWithStop(t *testing.T) {
	stop, end := context.WithCancel(context.Background())
	ctx, release := WithStop(context.Background(), stop)
	defer release()
	if ctx.Err() != nil {
		t.Fatal("ended before stop")
	}
	end()
	<-ctx.Done()

	ctx, release = WithStop(context.Background(), nil)
	if ctx.Err() != nil {
		t.Fatal("nil stop ended it")
	}
	release()
	if ctx.Err() == nil {
		t.Fatal("release did not end it")
	}
}
