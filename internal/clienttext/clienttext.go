// Package clienttext names a client's text in an error message.
package clienttext

import (
	"fmt"
	"strconv"
)

// Max is the longest client text Quote gives back whole.
const Max = 64

// Quote is client text as an error message names it: quoted, or only its
// length when longer than Max, so that no answer, log line or audit entry
// carries a client's megabyte back.
func Quote(text string) string {
	if len(text) > Max {
		return fmt.Sprintf("(%d bytes)", len(text))
	}
	return strconv.Quote(text)
}
