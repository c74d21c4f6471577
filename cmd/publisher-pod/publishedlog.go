package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// publishedLine is one line of --published-log: a record Redis accepted.
type publishedLine struct {
	EventID      string `json:"eventId"`
	PartitionKey string `json:"partitionKey"`
	StreamKey    string `json:"streamKey"`
	RecordID     string `json:"recordId"`
}

// publishedLog writes publishedLines to a file, buffered; a nil file (no
// --published-log) discards them.
type publishedLog struct {
	path string
	f    *os.File
	w    *bufio.Writer
	enc  *json.Encoder
}

// openPublishedLog creates or truncates path; "" gives a log that discards.
func openPublishedLog(path string) (*publishedLog, error) {
	if path == "" {
		return &publishedLog{}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open published log: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	return &publishedLog{path: path, f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Write appends one line.
func (l *publishedLog) Write(line publishedLine) error {
	if l.f == nil {
		return nil
	}
	if err := l.enc.Encode(line); err != nil {
		return fmt.Errorf("write published log %s: %w", l.path, err)
	}
	return nil
}

// Close flushes, syncs and closes the file.
func (l *publishedLog) Close() error {
	if l.f == nil {
		return nil
	}
	err := errors.Join(l.w.Flush(), l.f.Sync(), l.f.Close())
	if err != nil {
		return fmt.Errorf("close published log %s: %w", l.path, err)
	}
	return nil
}
