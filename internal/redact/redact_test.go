package redact_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/redact"
)

const secret = "PLANTED-SECRET-123"

func TestURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://u:" + secret + "@127.0.0.1:5432/db?sslmode=disable", "postgres://u:xxxxx@127.0.0.1:5432/db?sslmode=disable"},
		{"postgres://u:p%40ss" + secret + "@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u@h/db?sslmode=disable&password=" + secret, "postgres://u@h/db?sslmode=disable&password=xxxxx"},
		{"postgres://h/db?sslpassword=" + secret + "&application_name=x", "postgres://h/db?sslpassword=xxxxx&application_name=x"},
		{"clickhouse://default:" + secret + "@h:9000/db?secure=true", "clickhouse://default:xxxxx@h:9000/db?secure=true"},
		{"clickhouse://h:9000/db?username=u&password=" + secret, "clickhouse://h:9000/db?username=u&password=xxxxx"},
		// What url.Parse refuses keeps no user information at all.
		{"postgres://u:" + secret + "@h:notaport/db", "postgres://xxxxx@h:notaport/db"},
		{"postgres://u:pa/ss" + secret + "@h/db", "postgres://xxxxx@h/db"},
		{"clickhouse://h:bad/db?password=" + secret + "&x=1", "clickhouse://h:bad/db?password=xxxxx&x=1"},
		// libpq's key=value form, quoted and not.
		{"host=h user=u password=" + secret + " dbname=d", "host=h user=u password=xxxxx dbname=d"},
		{"host=h password='a b\\' " + secret + "' dbname=d", "host=h password=xxxxx dbname=d"},
		{"host=h PASSWORD = " + secret, "host=h PASSWORD=xxxxx"},
		// Nothing secret: unchanged.
		{"postgres://u@127.0.0.1:5432/db?sslmode=disable", "postgres://u@127.0.0.1:5432/db?sslmode=disable"},
		{"host=h user=u dbname=d", "host=h user=u dbname=d"},
		{"", ""},
	} {
		got := redact.URL(c.in)
		require.Equal(t, c.want, got, "redacting %q", c.in)
		require.NotContains(t, got, secret)
	}
}

// The masked URL still connects the same way, minus the password: pgx reads
// the same host, port, user and database from it.
func TestURLKeepsTheRest(t *testing.T) {
	t.Parallel()
	in := "postgres://doclog:" + secret + "@db.example:6432/ops?sslmode=require&application_name=doclog"
	want, err := pgconn.ParseConfig(in)
	require.NoError(t, err)
	got, err := pgconn.ParseConfig(redact.URL(in))
	require.NoError(t, err)
	require.Equal(t, redact.Mask, got.Password)
	want.Password = redact.Mask
	require.Equal(t, target(want), target(got))
}

// target is where a connection goes and as whom.
func target(c *pgconn.Config) []any {
	return []any{c.Host, c.Port, c.User, c.Password, c.Database, c.RuntimeParams}
}
