package httpapi

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// WaitPattern is the form of a ?wait= parameter, as the OpenAPI documents
// state it: a Go duration of one or more parts, each a decimal number and a
// unit (ns, us, ms, s, m, h: 10s, 1.5m, 1m30s), or a number of seconds with
// an optional exponent (5, 0.25, 1e3). No sign, no spaces.
const WaitPattern = `^(([0-9]+(\.[0-9]+)?|\.[0-9]+)(ns|us|ms|s|m|h))+$|^([0-9]+(\.[0-9]+)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`

var waitPattern = regexp.MustCompile(WaitPattern)

// ParseWait reads a ?wait= value of WaitPattern's form, capped at limit. The
// error says what is wrong, for a message that names the parameter.
func ParseWait(v string, limit time.Duration) (time.Duration, error) {
	if !waitPattern.MatchString(v) {
		if strings.HasPrefix(v, "-") {
			return 0, errors.New("must not be negative")
		}
		return 0, fmt.Errorf("%q is not a duration (e.g. 10s, 500ms) or a number of seconds", v)
	}
	if d, err := time.ParseDuration(v); err == nil {
		return min(d, limit), nil
	}
	// A number of seconds, or a duration longer than a Duration holds;
	// compared as seconds, so a huge number cannot overflow.
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs >= limit.Seconds() {
		return limit, nil
	}
	return time.Duration(secs * float64(time.Second)), nil
}
