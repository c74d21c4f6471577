package member

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrNoField is wrapped by the typed field accessors when the entry has no
// such field.
var ErrNoField = errors.New("no such field")

// Field is the value of field name as a string, and whether the entry has
// it. Redis stores every value as a string; go-redis decodes them so.
func (m *Message) Field(name string) (string, bool) {
	v, ok := m.Fields[name]
	if !ok {
		return "", false
	}
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	default:
		return fmt.Sprint(v), true
	}
}

// Int parses field name as a base-10 int64. It fails with an error
// wrapping [ErrNoField] when the field is missing, or a *strconv.NumError
// when it is not an integer.
func (m *Message) Int(name string) (int64, error) {
	s, ok := m.Field(name)
	if !ok {
		return 0, fmt.Errorf("entry %s %s: field %q: %w", m.StreamKey, m.ID, name, ErrNoField)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("entry %s %s: field %q: %w", m.StreamKey, m.ID, name, err)
	}
	return n, nil
}

// JSON decodes field name, a JSON document, into v (a pointer), as
// producer.PublishJSON writes it under [PayloadField]. It fails with an
// error wrapping [ErrNoField] when the field is missing, or the
// encoding/json error.
func (m *Message) JSON(name string, v any) error {
	s, ok := m.Field(name)
	if !ok {
		return fmt.Errorf("entry %s %s: field %q: %w", m.StreamKey, m.ID, name, ErrNoField)
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("entry %s %s: field %q: %w", m.StreamKey, m.ID, name, err)
	}
	return nil
}

// PayloadField is the field producer.PublishJSON writes a record's JSON
// payload to; read it with msg.JSON(member.PayloadField, &v).
const PayloadField = "payload"
