package hostcheck

import "testing"

func TestAllowed(t *testing.T) {
	t.Parallel()
	allowed := []string{"airlock.internal", "review.example:8443"}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.2", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"LOCALHOST", true},
		{"airlock.internal", true},
		{"airlock.internal:9000", true},
		{"AIRLOCK.INTERNAL:9000", true},
		{"review.example:8443", true},
		{"review.example:443", false},
		{"evil.com", false},
		{"evil.com:8080", false},
		{"localhost.evil.com", false},
		{"127.0.0.1.nip.io", false},
		{"", false},
		{":8080", false},
		{"10.0.0.1:8080", false},
	} {
		if got := Allowed(tc.host, allowed); got != tc.want {
			t.Errorf("Allowed(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}
