package jsonmessage

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadStreamRecordsAndInStreamError(t *testing.T) {
	in := "{\"status\":\"Pulling from x\",\"id\":\"latest\"}\r\n\n{\"status\":\"Downloading\",\"progressDetail\":{\"current\":5,\"total\":10}}\n" +
		"{\"errorDetail\":{\"message\":\"manifest unknown\"},\"error\":\"manifest unknown\"}\n{\"status\":\"never seen\"}\n"
	var seen []JSONMessage
	err := ReadStream(strings.NewReader(in), func(m JSONMessage) error {
		seen = append(seen, m)
		return nil
	})
	var je *JSONError
	if !errors.As(err, &je) || je.Message != "manifest unknown" {
		t.Fatalf("err = %v", err)
	}
	if len(seen) != 2 || seen[1].Progress.Current != 5 {
		t.Fatalf("seen = %+v", seen)
	}
}

func TestReadStreamTopLevelErrorOnly(t *testing.T) {
	err := ReadStream(strings.NewReader(`{"error":"old style"}`), nil)
	if err == nil || err.Error() != "old style" {
		t.Fatalf("err = %v", err)
	}
}

func TestDisplayStreamCleanEnd(t *testing.T) {
	var b strings.Builder
	if err := DisplayStream(strings.NewReader(`{"status":"Pull complete","id":"abc"}`+"\n"), &b); err != nil {
		t.Fatal(err)
	}
	if b.String() != "abc: Pull complete\n" {
		t.Fatalf("%q", b.String())
	}
	if err := ReadStream(io.LimitReader(strings.NewReader(""), 0), nil); err != nil {
		t.Fatal(err)
	}
}
