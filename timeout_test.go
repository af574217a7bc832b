package airlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// What ParseDuration accepts, decided here:
//
//   - Go durations exactly as time.ParseDuration reads them ("30m", "1h30m",
//     "1.5h", "+5m").
//   - ISO 8601 durations with weeks, days, hours, minutes and seconds
//     ("PT30M", "P1D", "P1DT2H30M", "P2W", "PT0.5S", "PT0,5S"). Designators
//     may be lower case ("pt30m"): ISO 8601 writes them in capitals, but
//     Java's Duration.parse and most libraries accept either, and the
//     meaning is unambiguous. Weeks may be combined with days ("P1W2D", as
//     ISO 8601-2 allows). Components must come in order, once each; only
//     the last may carry a fraction; a number needs digits on both sides of
//     its decimal mark.
//   - Years and months are refused with a message saying why: their length
//     varies. So are zero, negative, overflowing and non-ASCII input ("PT5ſ"
//     must not read as five seconds because strings.ToUpper("ſ") is "S").
func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want time.Duration
		err  string // part of the error; "" when accepted
	}{
		// Go durations.
		{"30m is thirty minutes", "30m", 30 * time.Minute, ""},
		{"1h30m is ninety minutes", "1h30m", 90 * time.Minute, ""},
		{"1.5h is ninety minutes", "1.5h", 90 * time.Minute, ""},
		{"300ms is 300 milliseconds", "300ms", 300 * time.Millisecond, ""},
		{"1ns is the shortest duration", "1ns", time.Nanosecond, ""},
		{"+5m is five minutes", "+5m", 5 * time.Minute, ""},
		{"2562047h is close to the longest duration", "2562047h", 2562047 * time.Hour, ""},
		{"the longest duration is accepted", "2562047h47m16.854775807s", time.Duration(1<<63 - 1), ""},
		{"0 is refused", "0", 0, `"0" must be positive`},
		{"0s is refused", "0s", 0, "must be positive"},
		{"-5m is refused", "-5m", 0, `"-5m" must be positive`},
		{"-9999999999h is refused as negative", "-9999999999h", 0, "must be positive"},
		{"9999999999h overflows and is refused", "9999999999h", 0, `"9999999999h" is too long`},
		{"2562048h overflows and is refused", "2562048h", 0, "is too long"},
		{"an empty duration is refused", "", 0, "empty duration"},
		{"a bare number is refused", "30", 0, `"30" is not a duration; write it like 30m, 1h30m or PT30M`},
		{"a space inside is refused", "30 m", 0, "is not a duration"},
		{"a leading space is refused", " 30m", 0, "is not a duration"},
		{"days are not a Go unit", "1d", 0, "is not a duration"},
		{"a unit in capitals is not a Go unit", "30M", 0, "is not a duration"},
		{"words are refused", "thirty minutes", 0, "is not a duration"},
		// ISO 8601.
		{"PT30M is thirty minutes", "PT30M", 30 * time.Minute, ""},
		{"P1D is a day", "P1D", 24 * time.Hour, ""},
		{"P1DT2H30M is a day, two hours and a half", "P1DT2H30M", 26*time.Hour + 30*time.Minute, ""},
		{"P2W is two weeks", "P2W", 14 * 24 * time.Hour, ""},
		{"P1W2D is nine days", "P1W2D", 9 * 24 * time.Hour, ""},
		{"PT0.5S is half a second", "PT0.5S", 500 * time.Millisecond, ""},
		{"PT0,5S uses a decimal comma", "PT0,5S", 500 * time.Millisecond, ""},
		{"PT1.5H is ninety minutes", "PT1.5H", 90 * time.Minute, ""},
		{"PT1H30M15S has every time unit", "PT1H30M15S", time.Hour + 30*time.Minute + 15*time.Second, ""},
		{"PT36H is thirty-six hours", "PT36H", 36 * time.Hour, ""},
		{"PT0.000000001S is a nanosecond", "PT0.000000001S", time.Nanosecond, ""},
		{"PT1.0000000004S rounds to the nanosecond", "PT1.0000000004S", time.Second, ""},
		{"pt30m in lower case is thirty minutes", "pt30m", 30 * time.Minute, ""},
		{"p1dT2h in mixed case is accepted", "p1dT2h", 26 * time.Hour, ""},
		{"PT2562047H is accepted", "PT2562047H", 2562047 * time.Hour, ""},
		{"PT9223372036S is accepted", "PT9223372036S", 9223372036 * time.Second, ""},
		{"P1Y is refused: years vary", "P1Y", 0, "years and months have no fixed length; use days or weeks"},
		{"P1M is refused: months vary", "P1M", 0, "years and months have no fixed length"},
		{"P1Y2M3D is refused", "P1Y2M3D", 0, "years and months"},
		{"PT1M is a minute, not a month", "PT1M", time.Minute, ""},
		{"P0D is refused", "P0D", 0, `"P0D" must be positive`},
		{"PT0S is refused", "PT0S", 0, "must be positive"},
		{"PT0.0000000001S rounds to zero and is refused", "PT0.0000000001S", 0, "must be positive"},
		{"P alone is refused", "P", 0, "no components"},
		{"PT alone is refused", "PT", 0, "no components"},
		{"P1DT is refused", "P1DT", 0, "nothing after T"},
		{"T twice is refused", "PT1HT2M", 0, "T twice"},
		{"a unit without a number is refused", "PTH", 0, "expected a number followed by a unit"},
		{"a number without a unit is refused", "PT30", 0, "expected a unit after 30"},
		{"hours before T are refused", "P1H", 0, "unknown unit H"},
		{"days after T are refused", "PT1D", 0, "unknown unit D"},
		{"an unknown unit is refused", "PT1X", 0, "unknown unit X"},
		{"a unit given twice is refused", "PT1H1H", 0, "units must appear once each, in the order W, D, T, H, M, S"},
		{"units out of order are refused", "PT1S1H", 0, "in the order W, D, T, H, M, S"},
		{"days before weeks are refused", "P1D1W", 0, "in the order"},
		{"a fraction before the last component is refused", "PT1.5H30M", 0, "only the last component may have a fraction"},
		{"a number starting with a dot is refused", "P.5D", 0, "expected a number"},
		{"a number ending with a dot is refused", "PT5.S", 0, "expected digits after the decimal mark"},
		{"two decimal marks are refused", "PT1.5.5S", 0, "unknown unit ."},
		{"a sign inside is refused", "PT-5M", 0, "expected a number"},
		{"a negative ISO duration is refused", "-PT5M", 0, "is not a duration"},
		{"a space inside is refused", "P1D T2H", 0, "expected a number"},
		{"a trailing space is refused", "PT5M ", 0, "expected a number followed by a unit"},
		{"an exponent is refused", "PT1E3S", 0, "unknown unit E"},
		{"a long s (U+017F) is not an S", "PT5ſ", 0, "only ASCII"},
		{"fullwidth digits are refused", "PT５M", 0, "only ASCII"},
		{"P999999999999D overflows and is refused", "P999999999999D", 0, `"P999999999999D" is too long`},
		{"PT9223372037S overflows and is refused", "PT9223372037S", 0, "is too long"},
		{"components that overflow together are refused", "P15250WT2562047H", 0, "is too long"},
		{"a number too long for int64 is refused", "PT" + strings.Repeat("9", 40) + "S", 0, "is too long"},
		{"a fraction that overflows is refused", "PT9223372036.9S", 0, "is too long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := airlock.ParseDuration(tc.in)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseDuration(%q) = %v, want an error containing %q", tc.in, got, tc.err)
			}
			if !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("ParseDuration(%q) error %q does not contain %q", tc.in, err, tc.err)
			}
		})
	}
}

// The same window written both ways is the same window.
func TestParseDurationISOMatchesGo(t *testing.T) {
	t.Parallel()
	for iso, goDur := range map[string]string{
		"PT30M": "30m", "PT1H30M": "1h30m", "P1D": "24h", "P1W": "168h", "P1DT1S": "24h1s",
		"PT0.5S": "500ms", "PT0.001S": "1ms", "PT1.25M": "75s", "P0.5D": "12h",
	} {
		a, err := airlock.ParseDuration(iso)
		if err != nil {
			t.Fatal(err)
		}
		b, err := airlock.ParseDuration(goDur)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s = %v but %s = %v", iso, a, goDur, b)
		}
	}
}

// The window: the default when none is asked; shortened to the maximum,
// never lengthened; refused below the minimum (raising it would lengthen it).
func TestLimitsWindow(t *testing.T) {
	t.Parallel()
	limits := airlock.DefaultLimits()
	tests := []struct {
		name    string
		limits  airlock.Limits
		timeout string
		want    time.Duration
		err     string
	}{
		{"no timeout gets the default of 15m", limits, "", 15 * time.Minute, ""},
		{"30m is kept", limits, "30m", 30 * time.Minute, ""},
		{"PT30M is kept", limits, "PT30M", 30 * time.Minute, ""},
		{"the maximum itself is kept", limits, "168h", 168 * time.Hour, ""},
		{"more than the maximum is shortened to it", limits, "200h", 168 * time.Hour, ""},
		{"P2W is shortened to the maximum", limits, "P2W", 168 * time.Hour, ""},
		{"the minimum itself is kept", limits, "1s", time.Second, ""},
		{"less than the minimum is refused", limits, "500ms", 0, "timeout 500ms is shorter than this provider's minimum of 1s"},
		{"PT0.5S is below the minimum", limits, "PT0.5S", 0, "shorter than this provider's minimum"},
		{"zero is refused", limits, "0s", 0, "timeout: \"0s\" must be positive"},
		{"a negative timeout is refused", limits, "-1m", 0, "must be positive"},
		{"garbage is refused", limits, "soon", 0, "timeout: \"soon\" is not a duration"},
		{"months are refused", limits, "P1M", 0, "years and months"},
		{"an overflowing timeout is refused", limits, "P999999999999D", 0, "too long"},
		{"a default above a custom maximum is cut to it", airlock.Limits{MinTimeout: time.Second, MaxTimeout: time.Minute, DefaultTimeout: time.Hour}, "", time.Minute, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.limits.Window(tc.timeout)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("Window(%q) = %v, %v; want %v", tc.timeout, got, err, tc.want)
				}
				return
			}
			checkOutcome(t, err, refusedWith(tc.err))
			var e *airlock.Error
			if errors.As(err, &e); e.Field != "timeout" {
				t.Fatalf("error field %q, want timeout", e.Field)
			}
		})
	}
}

// Validity: how long an approval lets the call start. The reviewer's
// valid_for may ask for less than the default or, up to the maximum, more.
func TestLimitsValidity(t *testing.T) {
	t.Parallel()
	limits := airlock.DefaultLimits()
	tests := []struct {
		name     string
		validFor string
		want     time.Duration
		err      string
	}{
		{"no valid_for gets the default of 5m", "", 5 * time.Minute, ""},
		{"less than the default is kept", "1m", time.Minute, ""},
		{"more than the default is kept", "30m", 30 * time.Minute, ""},
		{"ISO 8601 is accepted", "PT10M", 10 * time.Minute, ""},
		{"the maximum itself is kept", "1h", time.Hour, ""},
		{"more than the maximum is refused, not shortened", "61m", 0, "valid_for 61m is longer than this provider's maximum of 1h0m0s"},
		{"one second is enough", "1s", time.Second, ""},
		{"less than a second is refused", "999ms", 0, "valid_for must be at least 1s"},
		{"zero is refused", "0s", 0, "must be positive"},
		{"garbage is refused", "a while", 0, "valid_for: \"a while\" is not a duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := limits.Validity(tc.validFor)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("Validity(%q) = %v, %v; want %v", tc.validFor, got, err, tc.want)
				}
				return
			}
			checkOutcome(t, err, refusedWith(tc.err))
			var e *airlock.Error
			if errors.As(err, &e); e.Field != "valid_for" {
				t.Fatalf("error field %q, want valid_for", e.Field)
			}
		})
	}
}

// Limits.Validate names the flag to fix.
func TestLimitsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*airlock.Limits)
		err    string
	}{
		{"the defaults are consistent", func(*airlock.Limits) {}, ""},
		{"a zero minimum is refused", func(l *airlock.Limits) { l.MinTimeout = 0 }, "min-timeout must be positive"},
		{"a negative minimum is refused", func(l *airlock.Limits) { l.MinTimeout = -time.Second }, "min-timeout must be positive"},
		{"a maximum below the minimum is refused", func(l *airlock.Limits) { l.MaxTimeout = 500 * time.Millisecond }, "max-timeout (500ms) must be at least min-timeout (1s)"},
		{"a default below the minimum is refused", func(l *airlock.Limits) { l.DefaultTimeout = time.Millisecond }, "default-timeout (1ms) must lie between min-timeout (1s) and max-timeout (168h0m0s)"},
		{"a default above the maximum is refused", func(l *airlock.Limits) { l.DefaultTimeout = 200 * time.Hour }, "default-timeout"},
		{"a zero approval validity is refused", func(l *airlock.Limits) { l.ApprovalValidity = 0 }, "approval-validity must be positive"},
		{"a maximum validity below the default is refused", func(l *airlock.Limits) { l.MaxApprovalValidity = time.Minute }, "max-approval-validity (1m0s) must be at least approval-validity (5m0s)"},
		{"min = default = max is consistent", func(l *airlock.Limits) {
			l.MinTimeout, l.DefaultTimeout, l.MaxTimeout = time.Minute, time.Minute, time.Minute
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := airlock.DefaultLimits()
			tc.change(&l)
			err := l.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// The defaults of the README's Configuration table.
func TestDefaultLimits(t *testing.T) {
	t.Parallel()
	want := airlock.Limits{
		MinTimeout: time.Second, MaxTimeout: 168 * time.Hour, DefaultTimeout: 15 * time.Minute,
		ApprovalValidity: 5 * time.Minute, MaxApprovalValidity: time.Hour,
	}
	if got := airlock.DefaultLimits(); got != want {
		t.Fatalf("DefaultLimits() = %+v, want %+v", got, want)
	}
}
