package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client talks to doclog's ingest API and read store. It is safe for
// concurrent use.
type Client struct {
	cfg Config
	// ingest and readstore are the base URLs without a trailing slash.
	ingest, readstore string
}

// New returns a client for cfg, after WithDefaults and Validate.
func New(cfg Config) (*Client, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg,
		ingest:    strings.TrimSuffix(cfg.IngestURL, "/"),
		readstore: strings.TrimSuffix(cfg.ReadstoreURL, "/"),
	}, nil
}

// api names one of the two APIs and the token its routes take.
type api int

const (
	ingestWrite api = iota
	ingestRead
	readstoreRead
)

// request is one call as every attempt sends it.
type request struct {
	api    api
	method string
	path   string // escaped, from the API's root (idPath); "" is refused
	query  url.Values
	header http.Header
	body   []byte // nil: no body
}

func (c *Client) url(r request) (string, error) {
	base, name := c.readstore, "ReadstoreURL"
	if r.api != readstoreRead {
		base, name = c.ingest, "IngestURL"
	}
	if base == "" {
		return "", &permanentError{fmt.Errorf("client config: %s is not set", name)}
	}
	if r.path == "" {
		return "", &permanentError{errors.New("the id the call names is empty")}
	}
	u := base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	return u, nil
}

func (c *Client) newRequest(ctx context.Context, r request) (*http.Request, error) {
	u, err := c.url(r)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, &permanentError{fmt.Errorf("build the request: %w", err)}
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	token := c.cfg.ReadToken
	if r.api == ingestWrite {
		token = c.cfg.WriteToken
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// send sends r once and returns the answer when it is a success; any other
// answer is read and closed into an *APIError.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, parseAPIError(resp)
}

// do sends r until an attempt succeeds, fails for good, MaxAttempts are
// spent or ctx ends, and decodes the success's JSON body into out.
func (c *Client) do(ctx context.Context, r request, out any) error {
	var last error
	for attempt := 1; ; attempt++ {
		err := c.attempt(ctx, r, out)
		if err == nil {
			return nil
		}
		last = err
		if attempt >= c.cfg.MaxAttempts || !retryable(ctx, err) {
			break
		}
		if serr := sleep(ctx, c.delayFor(err, attempt)); serr != nil {
			return errors.Join(serr, last)
		}
	}
	return last
}

func (c *Client) attempt(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		// The answer was cut: the call as a whole can be sent again.
		return fmt.Errorf("read the answer of %s %s: %w", r.method, r.path, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &permanentError{fmt.Errorf("decode the answer of %s %s: %w", r.method, r.path, err)}
	}
	return nil
}

// idPath is prefix, the escaped id and suffix, or "" for an empty id, which
// url refuses: the path would name another route.
func idPath(prefix, id, suffix string) string {
	if id == "" {
		return ""
	}
	return prefix + url.PathEscape(id) + suffix
}

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the request body: %w", err)
	}
	return b, nil
}
