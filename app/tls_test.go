package app_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/projectors/analytics"
)

// TestEveryDependencyOverTLS runs every role with TLS to all three
// dependencies, set up only as an operator would, through the settings:
// Postgres with sslmode=verify-full in the URL, Kafka over SASL_SSL with a
// client certificate and SCRAM-SHA-512, ClickHouse over TLS with a client
// certificate named in its URL. Each server accepts nothing less, so a job
// that is applied, read back and counted in ClickHouse crossed all three.
func TestEveryDependencyOverTLS(t *testing.T) {
	t.Parallel()
	certs := testenv.TLSCerts(t)
	chAddr, db := testenv.ClickHouseTLSDatabase(t)
	chURL := (&url.URL{Scheme: "clickhouse", Host: chAddr, Path: "/" + db, RawQuery: url.Values{
		"secure":      {"true"},
		"tls_ca_file": {certs.CA}, "tls_cert_file": {certs.ClientCert}, "tls_key_file": {certs.ClientKey},
	}.Encode()}).String()
	s := settings(app.AllRoles, testenv.PostgresTLSSchema(t), testenv.KafkaSecure(t))
	s.ClickHouseURL = chURL
	r := start(t, s)
	r.awaitReadyz(http.StatusOK, 3*time.Minute)

	ingestURL := "http://" + r.app.Addr(app.RoleIngest)
	job, doc := submit(t, ingestURL)
	awaitStatus(t, ingestURL, job, "READ_READY", 3*time.Minute)
	requireDocument(t, "http://"+r.app.Addr(app.RoleReadstore), doc)

	cfg, err := analytics.ParseURL(chURL)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	reader, err := analytics.NewReader(ctx, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, reader.Close()) }()
	for {
		var n uint64
		require.NoError(t, reader.Conn().QueryRow(ctx, "SELECT count() FROM "+db+".operations WHERE document_id = ?", doc).Scan(&n))
		if n > 0 {
			break
		}
		require.NoError(t, ctx.Err(), "the document's operations never reached ClickHouse")
		time.Sleep(200 * time.Millisecond)
	}
}
