package producerit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/member/membertest"
	"github.com/rscoord/rscoord/client/producer"
)

// TestTypedPublishRoundTrip publishes with PublishMap and PublishJSON to
// real Redis and reads the entries back through the member's typed field
// helpers; a publish after Close is classified as neither retryable nor
// possibly written.
func TestTypedPublishRoundTrip(t *testing.T) {
	rdb := standaloneClient(t)
	f := newFixture(t, rdb, 2)
	p := f.producer(t)
	ctx := context.Background()

	key, id, err := p.PublishMap(ctx, "customer-1", map[string]string{"orderId": "o-1", "qty": "3"})
	if err != nil {
		t.Fatal(err)
	}
	rec := membertest.NewRecorder(f.prefix)
	fields := func(key, id string) map[string]string {
		out := map[string]string{}
		for k, v := range entry(t, rdb, key, id).Values {
			out[k] = v.(string)
		}
		return out
	}
	m := rec.Message(0, id, fields(key, id))
	if qty, err := m.Int("qty"); err != nil || qty != 3 {
		t.Fatalf("qty = %d %v", qty, err)
	}

	type order struct {
		ID  string `json:"id"`
		Qty int    `json:"qty"`
	}
	key, id, err = p.PublishJSON(ctx, "customer-1", order{ID: "o-2", Qty: 5})
	if err != nil {
		t.Fatal(err)
	}
	var got order
	if err := rec.Message(0, id, fields(key, id)).JSON(member.PayloadField, &got); err != nil || got != (order{"o-2", 5}) {
		t.Fatalf("payload %+v %v", got, err)
	}
	if _, _, err := p.PublishJSON(ctx, "customer-1", func() {}); !errors.Is(err, producer.ErrInvalidFields) || errors.Is(err, producer.ErrRetryable) {
		t.Fatalf("PublishJSON(func) = %v, want ErrInvalidFields, not retryable", err)
	}

	p.Close()
	_, _, err = p.PublishMap(ctx, "customer-1", map[string]string{"a": "b"})
	if !errors.Is(err, producer.ErrClosed) || errors.Is(err, producer.ErrRetryable) || errors.Is(err, producer.ErrPossiblyWritten) {
		t.Fatalf("publish after Close = %v, want ErrClosed, neither retryable nor possibly written", err)
	}
}
