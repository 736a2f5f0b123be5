package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
)

// jobBody is the body of POST /v1/jobs. Actions stay raw so that each is
// decoded on its own and an error names its position (actions[2].type);
// encoding/json would name only "actions.type".
type jobBody struct {
	DocumentID   string            `json:"documentId"`
	DocumentType string            `json:"documentType"`
	Branch       *string           `json:"branch"`
	Actions      []json.RawMessage `json:"actions"`
	QueueHint    []string          `json:"queueHint"`
	MaxRetries   *int              `json:"maxRetries"`
	Meta         json.RawMessage   `json:"meta"`
}

// createBody is the body of POST /v1/documents: a job's fields (actions
// optional) and the new document's name and slug.
type createBody struct {
	jobBody
	Name *string `json:"name"`
	Slug *string `json:"slug"`
}

// actionBody is one action as a client sends it.
type actionBody struct {
	ID             string           `json:"id"`
	Type           string           `json:"type"`
	Scope          string           `json:"scope"`
	TimestampUtcMs *int64           `json:"timestampUtcMs"`
	Input          json.RawMessage  `json:"input"`
	Context        json.RawMessage  `json:"context"`
	Signature      *oplog.Signature `json:"signature"`
}

// readBody checks the content type and reads the body within the limit.
func readBody(r *http.Request, limit int64) ([]byte, *APIError) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		if ct == "" {
			ct = "none"
		}
		return nil, &APIError{Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMedia,
			Message: fmt.Sprintf("Content-Type: %s is not application/json", ct), Field: "Content-Type"}
	}
	tooLarge := func() *APIError {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge,
			Message: fmt.Sprintf("request body exceeds the limit of %d bytes", limit)}
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge()
		}
		// The error of a connection names both ends' addresses.
		return nil, &APIError{Status: http.StatusBadRequest, Code: CodeMalformedJSON,
			Message: "the request body could not be read to its end", Cause: err}
	}
	return body, nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// trailing data, with errors naming the field under prefix.
func decodeStrict(data []byte, v any, prefix string) *APIError {
	bad := func(field, format string, args ...any) *APIError {
		return fieldError(http.StatusBadRequest, CodeMalformedJSON, field, format, args...)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if prefix == "" {
			return bad("", "the request body is empty; send a JSON object")
		}
		return bad(prefix, "empty")
	}
	if err := jsonvalue.DecodeStrict(data, v); err != nil {
		var (
			se *json.SyntaxError
			te *json.UnmarshalTypeError
			td *jsonvalue.TrailingDataError
			tx *jsonvalue.TextError
		)
		switch {
		case errors.As(err, &td):
			return bad(prefix, "malformed JSON: data after the JSON value at byte %d", td.Offset)
		case errors.As(err, &tx):
			return bad(prefix, "the request body is %s", tx)
		case errors.As(err, &se):
			return bad(prefix, "malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
		case errors.As(err, &te):
			if te.Field == "" {
				where := prefix
				if where == "" {
					return bad("", "the request body must be a JSON object, not %s", te.Value)
				}
				return bad(where, "must be an object, not %s", te.Value)
			}
			return bad(join(prefix, te.Field), "must be %s, not %s", jsonvalue.Kind(te.Type.Kind().String()), te.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return bad(prefix, "malformed JSON: unexpected end of input")
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
			if uq, err := strconv.Unquote(name); err == nil {
				name = uq
			}
			return bad(join(prefix, name), "unknown field")
		}
		return bad(prefix, "%s", msg)
	}
	return nil
}

func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

func isObject(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
