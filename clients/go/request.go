package berth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxErrorBody bounds how much of an error response is read for its message.
const maxErrorBody = 1 << 20

type request struct {
	method  string
	path    string
	query   url.Values
	body    any // encoded as JSON when not nil
	headers http.Header
	// unversioned sends the path without the /vX.Y prefix (for /_ping).
	unversioned bool
}

// do sends a request and returns the response with its body unread; error statuses become *Error.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	path := r.path
	if !r.unversioned {
		path = "/v" + c.versionForRequest(ctx) + path
	}
	u := url.URL{Scheme: c.scheme, Host: c.addr, Path: path, RawQuery: r.query.Encode()}
	if c.proto == "unix" {
		u.Host = unixHostPlaceholder
	}
	var body io.Reader
	if r.body != nil {
		buf, err := json.Marshal(r.body)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.headers {
		req.Header[k] = v
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, c.connectionError(err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, newError(resp.StatusCode, errorMessage(resp))
	}
	return resp, nil
}

// doJSON sends a request and decodes a JSON reply into out.
func (c *Client) doJSON(ctx context.Context, r request, out any) error {
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding %s %s reply: %w", r.method, r.path, err)
	}
	return nil
}

func (c *Client) connectionError(err error) error {
	if c.proto == "unix" && strings.Contains(err.Error(), "no such file or directory") {
		return fmt.Errorf("cannot connect to the daemon at %s: is it running? (%w)", c.host, err)
	}
	return fmt.Errorf("error during connect to %s: %w", c.host, err)
}

// errorMessage is the daemon's message: `{"message": ...}`, or plain text for old versions.
func errorMessage(resp *http.Response) string {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	text := strings.TrimSpace(string(raw))
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &m) == nil && m.Message != "" {
		return m.Message
	}
	if text == "" {
		return http.StatusText(resp.StatusCode)
	}
	return text
}

// boolQuery sets key=1 when v is true.
func boolQuery(q url.Values, key string, v bool) {
	if v {
		q.Set(key, "1")
	}
}

// filtersQuery encodes filters as the API's JSON map; nothing when empty.
func filtersQuery(q url.Values, filters map[string][]string) error {
	if len(filters) == 0 {
		return nil
	}
	buf, err := json.Marshal(filters)
	if err != nil {
		return err
	}
	q.Set("filters", string(buf))
	return nil
}

// pathEscape keeps "/" and ":" of image names readable in a path.
func pathEscape(s string) string {
	return strings.NewReplacer("%2F", "/", "%3A", ":", "%40", "@").Replace(url.PathEscape(s))
}
