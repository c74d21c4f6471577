package clienttext

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"empty", "", `""`},
		{"short", "rs-1", `"rs-1"`},
		{"quotes escaped", `a"b`, `"a\"b"`},
		{"at the limit", strings.Repeat("x", Max), `"` + strings.Repeat("x", Max) + `"`},
		{"past the limit", strings.Repeat("x", Max+1), "(65 bytes)"},
		{"a megabyte", strings.Repeat("x", 1<<20), "(1048576 bytes)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Quote(tc.text); got != tc.want {
				t.Fatalf("Quote = %q, want %q", got, tc.want)
			}
		})
	}
}
