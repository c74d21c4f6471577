package member_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/member/membertest"
)

func TestTypedFields(t *testing.T) {
	rec := membertest.NewRecorder("orders")
	m := rec.Message(0, "1-0", map[string]string{
		"n": "-42", "bad": "4x", member.PayloadField: `{"id":"o-1","qty":3}`, "broken": "{",
	})
	if n, err := m.Int("n"); err != nil || n != -42 {
		t.Errorf("Int(n) = %d %v", n, err)
	}
	var numErr *strconv.NumError
	if _, err := m.Int("bad"); !errors.As(err, &numErr) {
		t.Errorf("Int(bad) = %v, want a *strconv.NumError", err)
	}
	if _, err := m.Int("missing"); !errors.Is(err, member.ErrNoField) {
		t.Errorf("Int(missing) = %v, want ErrNoField", err)
	}
	var p struct {
		ID  string `json:"id"`
		Qty int    `json:"qty"`
	}
	if err := m.JSON(member.PayloadField, &p); err != nil || p.ID != "o-1" || p.Qty != 3 {
		t.Errorf("JSON(payload) = %+v %v", p, err)
	}
	if err := m.JSON("broken", &p); err == nil {
		t.Error("JSON(broken) succeeded")
	}
	if err := m.JSON("missing", &p); !errors.Is(err, member.ErrNoField) {
		t.Errorf("JSON(missing) = %v, want ErrNoField", err)
	}
	if _, ok := m.Field("missing"); ok {
		t.Error("Field(missing) found")
	}
}
