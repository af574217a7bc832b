package airlock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a positive duration written either as a Go duration
// ("30m", "1h30m") or as an ISO 8601 duration ("PT30M", "P1DT2H", "P2W").
// Years and months are refused: their length varies. Zero, negative and
// overflowing values are errors.
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
		if err != nil {
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

func parseISO8601(s string) (time.Duration, error) {
	bad := func(why string) error {
		return fmt.Errorf("%q is not an ISO 8601 duration (%s); write it like PT30M or P1DT2H", s, why)
	}
	rest := strings.ToUpper(s[1:])
	if rest == "" || rest == "T" {
		return 0, bad("no components")
	}
	var total float64 // seconds
	inTime := false
	seen := ""
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, bad("T twice")
			}
			inTime = true
			rest = rest[1:]
			if rest == "" {
				return 0, bad("nothing after T")
			}
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.' || rest[i] == ',') {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, bad("expected a number followed by a unit")
		}
		num, err := strconv.ParseFloat(strings.ReplaceAll(rest[:i], ",", "."), 64)
		if err != nil {
			return 0, bad("bad number")
		}
		unit := rest[i]
		rest = rest[i+1:]
		key := string(unit)
		if inTime {
			key = "T" + key
		}
		if strings.Contains(seen, key+" ") {
			return 0, bad("unit repeated")
		}
		seen += key + " "
		var secs float64
		switch {
		case !inTime && unit == 'W':
			secs = 7 * 86400
		case !inTime && unit == 'D':
			secs = 86400
		case inTime && unit == 'H':
			secs = 3600
		case inTime && unit == 'M':
			secs = 60
		case inTime && unit == 'S':
			secs = 1
		case !inTime && (unit == 'Y' || unit == 'M'):
			return 0, bad("years and months have no fixed length; use days or weeks")
		default:
			return 0, bad("unknown unit " + string(unit))
		}
		total += num * secs
	}
	if total*1e9 >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return time.Duration(math.Round(total * 1e9)), nil
}

// Limits are the provider's bounds on windows and validity (DESIGN.md §5).
type Limits struct {
	MinTimeout          time.Duration // shortest decision window accepted (1s)
	MaxTimeout          time.Duration // longer windows are shortened to this (168h)
	DefaultTimeout      time.Duration // window when the adapter asks for none (15m)
	ApprovalValidity    time.Duration // default expires_at - decided_at (5m)
	MaxApprovalValidity time.Duration // most a reviewer's valid_for may ask (1h)
}

// DefaultLimits returns the defaults of DESIGN.md §5.
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
