package apitest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/depwait"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/readstore"
)

// EnvSchemathesis names the variable holding the path of the schemathesis
// binary; scripts/test.sh installs it (scripts/schemathesis.sh) and sets it.
const EnvSchemathesis = "TEST_SCHEMATHESIS"

// The run's size and seed. TEST_SCHEMATHESIS_EXAMPLES and
// TEST_SCHEMATHESIS_SEED override them, to look further or elsewhere.
const (
	defaultExamples = 50
	defaultSeed     = 1
)

// envConsistencyToken names the variable that hands hooks.py the token.
const envConsistencyToken = "CONTRACT_CONSISTENCY_TOKEN"

// The documents the OpenAPI documents' examples name, which seed creates:
// the example document (with a slug, state and a child) and its child.
const (
	exampleDocument = "3f2c7a10-5b6d-4e8f-9a01-23456789abcd"
	exampleSlug     = "quarterly-report"
	exampleChild    = "9b1d0c2e-7f3a-4c5b-8d6e-0123456789ef"
)

// Bearer tokens of the APIs under test (at least 32 characters each).
const (
	writeToken = "contract-test-write-token-0123456789"
	readToken  = "contract-test-read-token-0123456789a"
)

// Every request schemathesis generates from an API's OpenAPI document, schema
// valid and not, is answered as the document says: every check (status codes,
// content types, headers and bodies against their schemas, schema-valid
// requests accepted, invalid ones refused, authentication not ignored,
// unsupported methods answered 405 with Allow), in every phase (examples,
// coverage, fuzzing, stateful sequences along the document's links).
func TestOpenAPIContract(t *testing.T) {
	bin := schemathesisBinary(t)
	a := startApp(t)
	token := seed(t, "http://"+a.Addr(app.RoleIngest), "http://"+a.Addr(app.RoleReadstore))
	for _, run := range []struct {
		name, api, token string
		// examples scales the run's example count.
		examples float64
	}{
		// A read token may call every route of the read store; a write
		// token every route of ingest. The read store goes first: the
		// ingest run's examples delete a document it reads.
		{name: "readstore", api: app.RoleReadstore, token: readToken, examples: 1},
		{name: "ingest", api: app.RoleIngest, token: writeToken, examples: 1},
		// A read token is refused every submit (403) and may read a
		// job's status; a smaller run proves the refusals conform.
		{name: "ingest with a read token", api: app.RoleIngest, token: readToken, examples: 0.2},
	} {
		t.Run(run.name, func(t *testing.T) {
			base := "http://" + a.Addr(run.api)
			out := schemathesis(t, bin, base, run.token, token, max(1, int(float64(examples(t))*run.examples)))
			summary := regexp.MustCompile(`(?m)^\s*(\d+) generated`).FindStringSubmatch(out)
			require.NotNil(t, summary, "schemathesis printed no count of test cases:\n%s", out)
			n, _ := strconv.Atoi(summary[1])
			require.Greater(t, n, 0, "schemathesis generated no test case:\n%s", out)
			tested := regexp.MustCompile(`(?m)^\s*Selected: (\d+)/(\d+)\s*\n\s*Tested: (\d+)`).FindStringSubmatch(out)
			require.NotNil(t, tested, "schemathesis printed no count of operations:\n%s", out)
			require.Equal(t, tested[2], tested[3], "schemathesis did not test every operation of the document:\n%s", out)
			t.Logf("%s: %s test cases, %s operations", run.name, summary[1], tested[3])
		})
	}
}

func examples(t *testing.T) int { return envInt(t, "TEST_SCHEMATHESIS_EXAMPLES", defaultExamples) }

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s=%q is not an integer", name, v)
	return n
}

func schemathesisBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(EnvSchemathesis)
	if bin == "" {
		t.Fatalf("%s is not set: run `make test`, or `scripts/schemathesis.sh install` and export the %s it prints",
			EnvSchemathesis, EnvSchemathesis)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v (install it with `scripts/schemathesis.sh install`)", EnvSchemathesis, bin, err)
	}
	return bin
}

// schemathesis runs every check in both modes against the API at base, which
// serves its own document at /openapi.yaml, and fails the test with
// schemathesis's report when it finds anything. It returns the report.
// consistencyToken is a valid token, which hooks.py puts in place of the
// generated ones of schema-valid requests.
func schemathesis(t *testing.T, bin, base, token, consistencyToken string, examples int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{
		"--config-file", "schemathesis.toml", "run", base + "/openapi.yaml", "--url", base,
		"--checks", "all", "--mode", "all", "--max-examples", strconv.Itoa(examples),
		"--seed", strconv.Itoa(envInt(t, "TEST_SCHEMATHESIS_SEED", defaultSeed)),
		// One worker: with two, the coverage phase's threads parse
		// Python source at the same time (hypothesis describing its
		// filters), which CPython 3.11's parser does not survive
		// ("AST constructor recursion depth mismatch"), and the run ends
		// in runtime errors rather than a verdict. No example database,
		// so a run depends on its seed alone and leaves no files behind.
		"--workers", "1", "--generation-database", "none",
		"--header", "Authorization: Bearer " + token,
		"--continue-on-failure", "--request-timeout", "40", "--no-color",
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// The hooks file is named relative to the package directory, where
	// go test runs.
	cmd.Env = append(os.Environ(), "NO_COLOR=1", envConsistencyToken+"="+consistencyToken,
		// Hypothesis's caches (character tables) go to the test's
		// temporary directory, not into the work tree.
		"HYPOTHESIS_STORAGE_DIRECTORY="+t.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("schemathesis %s ran %s", strings.Join(redacted(args, token), " "), time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("schemathesis did not finish within 5 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("schemathesis found the API at odds with its OpenAPI document (%v):\n%s", err, out)
	}
	return string(out)
}

func redacted(args []string, token string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, token, "<token>")
	}
	return out
}

// startApp runs every role, as `doclog serve` does, against the test
// Postgres and Kafka, with a write and a read token, and returns once both
// APIs and every component are ready.
func startApp(t *testing.T) *app.App {
	t.Helper()
	kenv := testenv.Kafka(t)
	s := &app.Settings{
		Roles:            app.AllRoles,
		OpsAddr:          "127.0.0.1:0",
		IngestAddr:       "127.0.0.1:0",
		ReadstoreAddr:    "127.0.0.1:0",
		AuthWriteTokens:  []string{writeToken},
		AuthReadTokens:   []string{readToken},
		DatabaseURL:      testenv.PostgresSchema(t),
		DatabaseMaxConns: 8,
		Migrate:          "auto",
		Kafka:            kenv.Config,
		Topics:           kenv.Topics,
		CreateTopics:     true,
		Projectors:       []string{"docview", "indexer"},
		Wait:             depwait.Config{MaxBackoff: 500 * time.Millisecond},
	}
	require.NoError(t, s.Validate())
	a, err := app.New(context.Background(), s, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "the app's stop")
		case <-time.After(time.Minute):
			t.Error("the app did not stop within a minute")
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if code, body := readyz(a); code == http.StatusOK && a.Addr(app.RoleIngest) != "" && a.Addr(app.RoleReadstore) != "" {
			break
		} else if !time.Now().Before(deadline) {
			t.Fatalf("the app was not ready within 2 minutes: /readyz answers %d %s", code, body)
		}
		select {
		case err := <-done:
			t.Fatalf("the app stopped before it was ready: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return a
}

func readyz(a *app.App) (int, string) {
	addr := a.Addr("ops")
	if addr == "" {
		return 0, "(not listening yet)"
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// seed creates the documents the OpenAPI documents' examples name through
// ingest, waits until the read store serves them, and returns the consistency
// token of the example document's creation, as its job status gives it and
// the read store takes it.
func seed(t *testing.T, ingestURL, readstoreURL string) string {
	t.Helper()
	for _, doc := range []string{exampleDocument, exampleSlug, exampleChild} {
		require.True(t, strings.Contains(string(readstore.OpenAPI), doc) || strings.Contains(string(ingest.OpenAPI), doc),
			"%s is no longer an example of the OpenAPI documents; keep the seeded documents and the examples together", doc)
	}
	child := submit(t, ingestURL, `{"documentId":"`+exampleChild+`","documentType":"doclog/json","name":"Appendix"}`)
	parent := submit(t, ingestURL, `{"documentId":"`+exampleDocument+`","documentType":"doclog/json","name":"Quarterly report",`+
		`"slug":"`+exampleSlug+`","actions":[{"type":"MERGE_PATCH","scope":"global","input":{"title":"Q3","status":"draft"}},`+
		`{"type":"ADD_RELATIONSHIP","scope":"document","input":{"targetId":"`+exampleChild+`"}}]}`)
	awaitStatus(t, ingestURL, child, "READ_READY")
	token := awaitStatus(t, ingestURL, parent, "READ_READY").ConsistencyToken
	// READ_READY is the document view's; the relationship index has the
	// child once a find with the token answers it.
	code, raw := call(t, http.MethodGet, readstoreURL+"/v1/documents?parent="+exampleDocument+"&wait=30s", readToken, "", readstore.TokenHeader, token)
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.Contains(t, string(raw), exampleChild, "the relationship index lists the example document's child")
	return token
}

// submit posts a create job with the write token and returns its job id.
func submit(t *testing.T, ingestURL, body string) string {
	t.Helper()
	code, raw := call(t, http.MethodPost, ingestURL+"/v1/documents", writeToken, body)
	require.Equal(t, http.StatusAccepted, code, "seeding %s: %s", body, raw)
	var accepted struct{ JobID string }
	require.NoError(t, json.Unmarshal(raw, &accepted))
	return accepted.JobID
}

// call sends a request with the bearer token, a JSON body unless body is
// empty and the header pairs given, and returns the status and body. A 429
// of ingest's backpressure is waited out (testenv.Admitted).
func call(t *testing.T, method, url, token, body string, header ...string) (int, []byte) {
	t.Helper()
	resp, err := testenv.Admitted(t, func() (*http.Response, error) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+token)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return (&http.Client{Timeout: time.Minute}).Do(req)
	})
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}
