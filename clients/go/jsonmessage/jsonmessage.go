// Package jsonmessage reads the progress streams of pull and push: one JSON record per line,
// where a record carrying "error"/"errorDetail" is a failure reported after the 200 status.
package jsonmessage

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSONError is a failure reported inside a progress stream.
type JSONError struct {
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

func (e *JSONError) Error() string { return e.Message }

// JSONProgress is the byte count of one layer's download or extraction.
type JSONProgress struct {
	Current int64 `json:"current,omitempty"`
	Total   int64 `json:"total,omitempty"`
}

// JSONMessage is one record of a progress stream.
type JSONMessage struct {
	ID       string           `json:"id,omitempty"`
	Status   string           `json:"status,omitempty"`
	Progress *JSONProgress    `json:"progressDetail,omitempty"`
	Bar      string           `json:"progress,omitempty"`
	Aux      *json.RawMessage `json:"aux,omitempty"`
	Error    *JSONError       `json:"errorDetail,omitempty"`
	// ErrorMessage is the older top-level form of Error.
	ErrorMessage string `json:"error,omitempty"`
}

// maxRecord bounds one record; a longer line means a broken stream.
const maxRecord = 16 << 20

// ReadStream calls fn for each record as it arrives, and returns the stream's error record as a
// *JSONError (or fn's error) as soon as one is seen. A clean end of the stream returns nil.
func ReadStream(r io.Reader, fn func(JSONMessage) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxRecord)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || (len(line) == 1 && line[0] == '\r') {
			continue
		}
		var m JSONMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("invalid progress record %q: %w", truncate(line), err)
		}
		if m.Error != nil || m.ErrorMessage != "" {
			e := m.Error
			if e == nil || e.Message == "" {
				e = &JSONError{Message: m.ErrorMessage}
			}
			return e
		}
		if fn != nil {
			if err := fn(m); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// DisplayStream writes each record's status as a plain line to out and returns the stream's
// error, if any.
func DisplayStream(r io.Reader, out io.Writer) error {
	return ReadStream(r, func(m JSONMessage) error {
		line := m.Status
		if m.ID != "" {
			line = m.ID + ": " + line
		}
		if m.Bar != "" {
			line += " " + m.Bar
		}
		if line == "" {
			return nil
		}
		_, err := fmt.Fprintln(out, line)
		return err
	})
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}
