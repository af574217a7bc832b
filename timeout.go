package airlock

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// ParseDuration reads a positive duration written either as a Go duration
// ("30m", "1h30m") or as an ISO 8601 duration ("PT30M", "P1DT2H", "P2W").
// Years and months are refused: their length varies. Zero, negative and
// overflowing values are errors.
//
// ISO 8601 designators may be written in lower case ("pt30m"), as Java's
// Duration.parse and most libraries accept; components must come in the
// standard order (W, D, then after T: H, M, S), each at most once, and only
// the last may have a fraction (with '.' or ',').
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var d time.Duration
	var err error
	if s[0] == 'P' || s[0] == 'p' {
		d, err = parseISO8601(s)
	} else {
		d, err = time.ParseDuration(s)
		switch {
		case err == nil:
		case goDurationSyntax().MatchString(s) && s[0] == '-':
			err = fmt.Errorf("%q must be positive", s)
		case goDurationSyntax().MatchString(s):
			// time.ParseDuration fails on well-formed input only when it
			// overflows.
			err = fmt.Errorf("%q is too long; the longest duration is %s", s, time.Duration(math.MaxInt64))
		default:
			err = fmt.Errorf("%q is not a duration; write it like 30m, 1h30m or PT30M", s)
		}
	}
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

// goDurationSyntax is the grammar time.ParseDuration accepts, compiled on
// first use (only to explain an error), not at start-up.
var goDurationSyntax = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)
})

// isoUnit is one ISO 8601 duration component.
type isoUnit struct {
	key string // designator, "T"-prefixed in the time part
	d   time.Duration
}

// isoUnits are the ISO 8601 duration components Airlock accepts, in the
// order they must appear.
var isoUnits = []isoUnit{
	{"W", 7 * 24 * time.Hour},
	{"D", 24 * time.Hour},
	{"TH", time.Hour},
	{"TM", time.Minute},
	{"TS", time.Second},
}

func parseISO8601(s string) (time.Duration, error) {
	bad := func(why string) error {
		return fmt.Errorf("%q is not an ISO 8601 duration (%s); write it like PT30M or P1DT2H", s, why)
	}
	tooLong := fmt.Errorf("%q is too long; the longest duration is %s", s, time.Duration(math.MaxInt64))
	// Upper-case ASCII only: strings.ToUpper would turn "ſ" (U+017F) into
	// "S" and accept "PT5ſ" as five seconds.
	rest := []byte(s[1:])
	for i, c := range rest {
		switch {
		case c >= utf8.RuneSelf:
			return 0, bad("only ASCII digits and designators are allowed")
		case 'a' <= c && c <= 'z':
			rest[i] = c - ('a' - 'A')
		}
	}
	if len(rest) == 0 || string(rest) == "T" {
		return 0, bad("no components")
	}
	var total time.Duration
	inTime := false
	next := 0 // index in isoUnits of the first unit still allowed
	fraction := false
	for len(rest) > 0 {
		if rest[0] == 'T' {
			if inTime {
				return 0, bad("T twice")
			}
			inTime = true
			rest = rest[1:]
			if len(rest) == 0 {
				return 0, bad("nothing after T")
			}
			continue
		}
		if fraction {
			return 0, bad("only the last component may have a fraction")
		}
		i := 0
		for i < len(rest) && '0' <= rest[i] && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, bad("expected a number followed by a unit")
		}
		whole := string(rest[:i])
		frac := ""
		if i < len(rest) && (rest[i] == '.' || rest[i] == ',') {
			j := i + 1
			for j < len(rest) && '0' <= rest[j] && rest[j] <= '9' {
				j++
			}
			if j == i+1 {
				return 0, bad("expected digits after the decimal mark")
			}
			frac = string(rest[i+1 : j])
			fraction = true
			i = j
		}
		if i == len(rest) {
			return 0, bad("expected a unit after " + string(rest[:i]))
		}
		unit := string(rest[i])
		rest = rest[i+1:]
		if !inTime && (unit == "Y" || unit == "M") {
			return 0, bad("years and months have no fixed length; use days or weeks")
		}
		key := unit
		if inTime {
			key = "T" + unit
		}
		k := slices.IndexFunc(isoUnits, func(u isoUnit) bool { return u.key == key })
		switch {
		case k < 0:
			return 0, bad("unknown unit " + unit)
		case k < next:
			return 0, bad("units must appear once each, in the order W, D, T, H, M, S")
		}
		next = k + 1
		d, ok := component(whole, frac, isoUnits[k].d)
		if !ok || total > math.MaxInt64-d {
			return 0, tooLong
		}
		total += d
	}
	return total, nil
}

// component returns whole.frac units, rounded to the nanosecond; ok is false
// on overflow.
func component(whole, frac string, unit time.Duration) (time.Duration, bool) {
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || n > math.MaxInt64/int64(unit) {
		return 0, false
	}
	d := time.Duration(n) * unit
	if frac != "" {
		// A unit is at most a week (6.048e14 ns), well inside float64's
		// exact range, so the fraction is exact to well under a nanosecond.
		f, err := strconv.ParseFloat("0."+frac, 64)
		if err != nil {
			return 0, false
		}
		fd := time.Duration(math.Round(f * float64(unit)))
		if d > math.MaxInt64-fd {
			return 0, false
		}
		d += fd
	}
	return d, true
}

// Limits are the provider's bounds on windows and validity: the flags
// --min-timeout, --max-timeout, --default-timeout, --approval-validity and
// --max-approval-validity (the README's Configuration table).
type Limits struct {
	MinTimeout          time.Duration // shortest decision window accepted (1s)
	MaxTimeout          time.Duration // longer windows are shortened to this (168h)
	DefaultTimeout      time.Duration // window when the adapter asks for none (15m)
	ApprovalValidity    time.Duration // default expires_at - decided_at (5m)
	MaxApprovalValidity time.Duration // most a reviewer's valid_for may ask (1h)
}

// DefaultLimits returns the defaults of those flags.
func DefaultLimits() Limits {
	return Limits{
		MinTimeout:          time.Second,
		MaxTimeout:          168 * time.Hour,
		DefaultTimeout:      15 * time.Minute,
		ApprovalValidity:    5 * time.Minute,
		MaxApprovalValidity: time.Hour,
	}
}

// Validate checks that the limits are consistent; errors name the flag.
func (l Limits) Validate() error {
	switch {
	case l.MinTimeout <= 0:
		return fmt.Errorf("min-timeout must be positive")
	case l.MaxTimeout < l.MinTimeout:
		return fmt.Errorf("max-timeout (%s) must be at least min-timeout (%s)", l.MaxTimeout, l.MinTimeout)
	case l.DefaultTimeout < l.MinTimeout || l.DefaultTimeout > l.MaxTimeout:
		return fmt.Errorf("default-timeout (%s) must lie between min-timeout (%s) and max-timeout (%s)", l.DefaultTimeout, l.MinTimeout, l.MaxTimeout)
	case l.ApprovalValidity <= 0:
		return fmt.Errorf("approval-validity must be positive")
	case l.MaxApprovalValidity < l.ApprovalValidity:
		return fmt.Errorf("max-approval-validity (%s) must be at least approval-validity (%s)", l.MaxApprovalValidity, l.ApprovalValidity)
	}
	return nil
}

// Window returns the decision window for a requested timeout: the default
// when none was asked, shortened to MaxTimeout, never lengthened. A window
// shorter than MinTimeout is refused, since raising it would lengthen it.
func (l Limits) Window(timeout string) (time.Duration, error) {
	if timeout == "" {
		return min(l.DefaultTimeout, l.MaxTimeout), nil
	}
	d, err := ParseDuration(timeout)
	if err != nil {
		return 0, Invalid("timeout", "timeout: %v", err)
	}
	if d < l.MinTimeout {
		return 0, Invalid("timeout", "timeout %s is shorter than this provider's minimum of %s", timeout, l.MinTimeout)
	}
	return min(d, l.MaxTimeout), nil
}

// Validity returns how long an approval lets the call start: the default, or
// the reviewer's valid_for when given (at most MaxApprovalValidity).
func (l Limits) Validity(validFor string) (time.Duration, error) {
	if validFor == "" {
		return l.ApprovalValidity, nil
	}
	d, err := ParseDuration(validFor)
	if err != nil {
		return 0, Invalid("valid_for", "valid_for: %v", err)
	}
	if d < time.Second {
		return 0, Invalid("valid_for", "valid_for must be at least 1s")
	}
	if d > l.MaxApprovalValidity {
		return 0, Invalid("valid_for", "valid_for %s is longer than this provider's maximum of %s", validFor, l.MaxApprovalValidity)
	}
	return d, nil
}
