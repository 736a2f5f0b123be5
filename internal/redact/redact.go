// Package redact hides the secrets of connection strings — Postgres and
// ClickHouse URLs, libpq key=value strings — before doclog prints them, logs
// them or puts them in an error. It is the one place that knows what a secret
// looks like in such a string: every banner line, log field and error message
// that shows a connection string passes it through URL first.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask stands in for every secret hidden; it is what url.URL.Redacted uses.
const Mask = "xxxxx"

// URL returns s with its password and every secret parameter replaced by
// Mask: the password of a URL's user information, query parameters such as
// password or sslpassword, and the same keys of a key=value string. A URL
// that does not parse loses its whole user information, since where its
// password ends cannot be known. Anything else is returned as given.
func URL(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return keywordValue.ReplaceAllString(s, "${1}="+Mask)
	}
	u, err := url.Parse(s)
	if err != nil {
		return malformed(s, i)
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), Mask)
	}
	u.RawQuery = query(u.RawQuery)
	return u.String()
}

// secretKey matches the names of parameters that carry a secret: password,
// sslpassword, token, client_secret and the like.
const secretKey = `(?i)\b([a-z_]*(?:password|secret|token)[a-z_]*|pass|pwd)\s*`

var (
	// keywordValue finds a secret's value in a key=value string: a quoted
	// value (with \' and \\ escapes, as libpq reads them) or up to the next
	// space.
	keywordValue = regexp.MustCompile(secretKey + `=\s*('(?:[^'\\]|\\.)*'?|\S*)`)
	// queryValue finds one in a query string that does not decode.
	queryValue = regexp.MustCompile(secretKey + `=([^&#\s]*)`)
)

// query masks the secret parameters of a raw query string, keeping the
// others as they were written.
func query(rawQuery string) string {
	if rawQuery == "" {
		return rawQuery
	}
	parts := strings.Split(rawQuery, "&")
	for n, p := range parts {
		name, _, ok := strings.Cut(p, "=")
		key, err := url.QueryUnescape(name)
		if err != nil {
			key = name
		}
		if ok && isSecret(key) {
			parts[n] = name + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

var secretName = regexp.MustCompile(`^` + secretKey + `$`)

func isSecret(key string) bool { return secretName.MatchString(key) }

// malformed redacts a URL url.Parse refuses (its error would quote it
// whole): everything between the scheme and the last @ goes, and so do the
// secret parameters after it.
func malformed(s string, schemeEnd int) string {
	head, rest := s[:schemeEnd+3], s[schemeEnd+3:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = Mask + rest[at:]
	}
	return head + queryValue.ReplaceAllString(rest, "${1}="+Mask)
}
