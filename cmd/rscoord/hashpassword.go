package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/gateway/auth"
)

// HashPasswordCmd is "rscoord hash-password": it reads one password (the
// first line of stdin) and prints its bcrypt hash for the users file. The
// password never appears on the command line.
type HashPasswordCmd struct {
	Cost int `default:"10" help:"bcrypt cost (4..31); each step doubles the time of every check."`
}

// Run hashes the password read from stdin.
func (h *HashPasswordCmd) Run(in io.Reader, out io.Writer) error {
	if h.Cost < bcrypt.MinCost || h.Cost > bcrypt.MaxCost {
		return fmt.Errorf("hash-password: --cost %d is outside %d..%d", h.Cost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	line, err := bufio.NewReader(io.LimitReader(in, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("hash-password: read stdin: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return errors.New("hash-password: no password on stdin (e.g. printf %s \"$PW\" | rscoord hash-password)")
	}
	hash, err := auth.HashPassword(password, h.Cost)
	if err != nil {
		return fmt.Errorf("hash-password: %w", err)
	}
	return printLine(out, "%s", hash)
}
