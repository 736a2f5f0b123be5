package ctlcli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/readstore"
)

// cliExample is one command of a ```sh block of docs/cli.md.
type cliExample struct {
	line int      // where it starts in the file
	text string   // as written, continuation lines joined
	args []string // the doclogctl part, shell words expanded
	exit int      // the exit code it documents
	// setups name what the block's <!-- examples: setup ... --> comment
	// asks to be done before its first command.
	setups []string
}

var (
	exampleDirective = regexp.MustCompile(`^<!--\s*examples:\s*(skip|setup)\b:?\s*(.*?)\s*-->$`)
	exampleExit      = regexp.MustCompile(`\bexit (\d)\b`)
)

// cliExamples extracts the examples of a Markdown file, as docs/testing.md
// describes: each line of a ```sh block that starts with doclogctl (with its
// continuation lines) is one; a block preceded by <!-- examples: skip REASON
// --> is left out (the reasons are returned), one preceded by <!-- examples:
// setup NAME... --> asks for those setups first. Only the doclogctl command
// runs: a pipe, a list (||, &&, ;) or a redirection ends it, and a trailing
// "# exit N" comment documents its exit code (0 without one).
func cliExamples(path string) (examples []cliExample, skipped []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var (
		inBlock, skip bool
		setups        []string
		directive     []string // of the comment just before a block
		pending       string   // a command continued on the next line
		pendingLine   int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !inBlock && exampleDirective.MatchString(trimmed):
			directive = exampleDirective.FindStringSubmatch(trimmed)[1:]
			continue
		case !inBlock && strings.HasPrefix(trimmed, "```"):
			inBlock = true
			skip, setups = false, nil
			if directive != nil && trimmed == "```sh" {
				switch directive[0] {
				case "skip":
					if directive[1] == "" {
						return nil, nil, fmt.Errorf("%s:%d: <!-- examples: skip --> needs a reason", path, n)
					}
					skip = true
					skipped = append(skipped, fmt.Sprintf("line %d: %s", n, directive[1]))
				case "setup":
					setups = strings.Fields(strings.ReplaceAll(directive[1], ",", " "))
				}
			}
			if trimmed != "```sh" {
				skip = true // not shell
			}
			directive = nil
			continue
		case inBlock && trimmed == "```":
			inBlock = false
			continue
		case !inBlock:
			if trimmed != "" {
				directive = nil
			}
			continue
		case skip:
			continue
		}
		if pending == "" {
			pendingLine = n
		}
		if strings.HasSuffix(trimmed, `\`) {
			pending += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		text := pending + trimmed
		pending = ""
		if text != "doclogctl" && !strings.HasPrefix(text, "doclogctl ") {
			continue
		}
		words, comment, err := exampleWords(text)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %s: %w", path, pendingLine, text, err)
		}
		ex := cliExample{line: pendingLine, text: text, args: words[1:], setups: setups}
		setups = nil
		if m := exampleExit.FindStringSubmatch(comment); m != nil {
			ex.exit, _ = strconv.Atoi(m[1])
		}
		examples = append(examples, ex)
	}
	return examples, skipped, sc.Err()
}

// exampleWords splits the first command of a shell line into words as sh
// does, for the subset examples use: single and double quotes, backslash
// escapes, $NAME and ${NAME} from the environment. It stops at an unquoted
// |, &, ;, < or > and returns the text of a trailing # comment. Command
// substitution is refused: an example must stand alone.
func exampleWords(s string) (words []string, comment string, err error) {
	var (
		cur     strings.Builder
		inWord  bool
		quote   rune
		runes   = []rune(s)
		flush   = func() { words = append(words, cur.String()); cur.Reset(); inWord = false }
		expand  func(i int) (int, error)
		isIdent = func(r rune) bool {
			return r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		}
	)
	expand = func(i int) (int, error) { // runes[i] == '$'
		j := i + 1
		switch {
		case j < len(runes) && runes[j] == '(':
			return 0, fmt.Errorf("command substitution is not supported in an example")
		case j < len(runes) && runes[j] == '{':
			for k := j + 1; k < len(runes); k++ {
				if runes[k] == '}' {
					cur.WriteString(os.Getenv(string(runes[j+1 : k])))
					return k, nil
				}
			}
			return 0, fmt.Errorf("unclosed ${")
		}
		k := j
		for k < len(runes) && isIdent(runes[k]) {
			k++
		}
		if k == j {
			cur.WriteRune('$')
			return i, nil
		}
		cur.WriteString(os.Getenv(string(runes[j:k])))
		return k - 1, nil
	}
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch {
			case r == '"':
				quote = 0
			case r == '\\' && i+1 < len(runes) && strings.ContainsRune("\"\\$`", runes[i+1]):
				i++
				cur.WriteRune(runes[i])
			case r == '$':
				if i, err = expand(i); err != nil {
					return nil, "", err
				}
			case r == '`':
				return nil, "", fmt.Errorf("command substitution is not supported in an example")
			default:
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(runes):
			i++
			cur.WriteRune(runes[i])
			inWord = true
		case r == ' ' || r == '\t':
			if inWord {
				flush()
			}
		case r == '#' && !inWord:
			return words, string(runes[i+1:]), nil
		case strings.ContainsRune("|&;<>", r):
			if inWord {
				flush()
			}
			// The rest is another command; a comment at its end still
			// documents the line.
			if c := strings.LastIndex(string(runes[i:]), " #"); c >= 0 {
				comment = string(runes[i:])[c+2:]
			}
			return words, comment, nil
		case r == '`':
			return nil, "", fmt.Errorf("command substitution is not supported in an example")
		case r == '$':
			inWord = true
			if i, err = expand(i); err != nil {
				return nil, "", err
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, "", fmt.Errorf("unclosed %c", quote)
	}
	if inWord {
		flush()
	}
	return words, "", nil
}

func TestExampleWords(t *testing.T) {
	t.Setenv("EXAMPLE_VAR", "v a")
	for _, tc := range []struct {
		in      string
		words   []string
		comment string
	}{
		{`doclogctl status`, []string{"doclogctl", "status"}, ""},
		{`doclogctl jobs submit --actions '[{"a":"b c"}]' --wait 10s`, []string{"doclogctl", "jobs", "submit", "--actions", `[{"a":"b c"}]`, "--wait", "10s"}, ""},
		{`doclogctl x "a \"q\" $EXAMPLE_VAR" ${EXAMPLE_VAR}x`, []string{"doclogctl", "x", `a "q" v a`, "v ax"}, ""},
		{`doclogctl docs ops nope   # exit 1: no such document`, []string{"doclogctl", "docs", "ops", "nope"}, " exit 1: no such document"},
		{`doclogctl verify -o json | jq '.findings | length'`, []string{"doclogctl", "verify", "-o", "json"}, ""},
		{`doclogctl docs validate d || echo "needs attention"  # exit 3`, []string{"doclogctl", "docs", "validate", "d"}, " exit 3"},
		{`doclogctl a#b`, []string{"doclogctl", "a#b"}, ""},
	} {
		words, comment, err := exampleWords(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.words, words, tc.in)
		require.Equal(t, tc.comment, comment, tc.in)
	}
	_, _, err := exampleWords(`doclogctl jobs get $(cat id)`)
	require.ErrorContains(t, err, "command substitution")
	_, _, err = exampleWords(`doclogctl x 'open`)
	require.ErrorContains(t, err, "unclosed")
}

// exampleSetups are what an example block can ask for with
// <!-- examples: setup NAME -->, each run once before the block.
var exampleSetups = map[string]func(t *testing.T, p *pipeline){}

// Every example of docs/cli.md runs, in the order written, against one
// stack — Postgres, Kafka and every role but the APIs in-process, as doclog
// serve composes them — and exits with the code it documents. doclogctl
// finds the stack through DOCLOG_* variables, as an operator's shell would,
// so an example is run exactly as it is written.
func TestCLIExamples(t *testing.T) {
	examples, skipped, err := cliExamples("../../docs/cli.md")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(examples), 10, "docs/cli.md has examples")
	for _, s := range skipped {
		t.Logf("not run (docs/cli.md %s)", s)
	}
	addr, database := testenv.ClickHouseDatabase(t)
	readstoreAddr := testenv.UnusedAddr(t)
	p := startPipeline(t, func(s *app.Settings) {
		s.Projectors = append(s.Projectors, "analytics")
		s.ClickHouseURL = "clickhouse://" + addr + "/" + database
		s.Roles = append(s.Roles, app.RoleReadstore)
		s.ReadstoreAddr = readstoreAddr
	})
	t.Setenv("DOCLOG_DATABASE_URL", p.url)
	t.Setenv("DOCLOG_KAFKA_SEEDS", flagValue(t, p.args, "--kafka-seeds"))
	t.Setenv("DOCLOG_TOPICS_PREFIX", flagValue(t, p.args, "--topics-prefix"))
	t.Setenv("CLICKHOUSE_URL", "clickhouse://"+addr+"/"+database)
	for _, ex := range examples {
		for _, name := range ex.setups {
			setup, ok := exampleSetups[name]
			require.True(t, ok, "docs/cli.md:%d asks for setup %q, which examples_test.go does not have", ex.line, name)
			setup(t, p)
		}
		code, out, errOut := ctl(t, ex.args...)
		require.Equal(t, ex.exit, code, "docs/cli.md:%d: %s\nexits %d, documented %d\nstdout:\n%s\nstderr:\n%s", ex.line, ex.text, code, ex.exit, out, errOut)
	}

	// Read-your-writes through doclogctl: the status jobs submit --wait
	// prints carries the token the read store takes as it is, in the
	// header or the query parameter, and the read waits for the write.
	code, out, errOut := ctl(t, "jobs", "submit", "--document-id", "doc-1", "--type", "doclog/json", "--wait", "30s", "-o", "json",
		"--actions", `[{"type":"MERGE_PATCH","scope":"global","input":{"title":"mine"}}]`)
	require.Equal(t, exitOK, code, errOut)
	var status jobStatus
	require.NoError(t, json.Unmarshal([]byte(out), &status), out)
	require.NotEmpty(t, status.ConsistencyToken, out)
	code, out, errOut = ctl(t, "jobs", "get", status.JobID, "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var got []jobStatus
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, status.ConsistencyToken, got[0].ConsistencyToken, "jobs get prints the same token")
	for _, read := range []struct{ query, header string }{
		{header: status.ConsistencyToken},
		{query: "&consistencyToken=" + url.QueryEscape(got[0].ConsistencyToken)},
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+readstoreAddr+"/v1/documents/doc-1?wait=30s"+read.query, nil)
		require.NoError(t, err)
		if read.header != "" {
			req.Header.Set(readstore.TokenHeader, read.header)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Contains(t, string(body), `"title":"mine"`, "the job's write is visible with its token")
	}
	// The examples' job id is the one its idempotency key derives.
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), "jobs get "+model.JobIDFromIdempotencyKey("hello-1"))

}

// flagValue is the value of flag in args.
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	t.Fatalf("%s is not among %v", flag, args)
	return ""
}
