package membertest_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/member/membertest"
)

func TestRecorderRecordsSettlement(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		handle func(ctx context.Context, msgs []*member.Message) error
		want   []membertest.Outcome // per message
		calls  []string             // ops in order
	}{
		{"ack", func(ctx context.Context, m []*member.Message) error { return m[0].Ack(ctx) },
			[]membertest.Outcome{membertest.Acked, membertest.Pending}, []string{"ack"}},
		{"ackdel", func(ctx context.Context, m []*member.Message) error { return m[1].AckDel(ctx) },
			[]membertest.Outcome{membertest.Pending, membertest.AckDeleted}, []string{"ackdel"}},
		{"nack", func(ctx context.Context, m []*member.Message) error { m[0].Nack(); return nil },
			[]membertest.Outcome{membertest.Nacked, membertest.Pending}, []string{"nack"}},
		{"nack after ack is ignored", func(ctx context.Context, m []*member.Message) error {
			if err := m[0].Ack(ctx); err != nil {
				return err
			}
			m[0].Nack()
			return nil
		}, []membertest.Outcome{membertest.Acked, membertest.Pending}, []string{"ack"}},
		{"ack after nack", func(ctx context.Context, m []*member.Message) error {
			m[0].Nack()
			return m[0].Ack(ctx)
		}, []membertest.Outcome{membertest.Acked, membertest.Pending}, []string{"nack", "ack"}},
		{"ackall", func(ctx context.Context, m []*member.Message) error { return member.AckAll(ctx, m) },
			[]membertest.Outcome{membertest.Acked, membertest.Acked}, []string{"ack"}},
		{"ackdelall", func(ctx context.Context, m []*member.Message) error { return member.AckDelAll(ctx, m) },
			[]membertest.Outcome{membertest.AckDeleted, membertest.AckDeleted}, []string{"ackdel"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := membertest.NewRecorder("orders")
			msgs := []*member.Message{
				rec.Message(2, "1-0", map[string]string{"k": "a"}),
				rec.Message(2, "2-0", map[string]string{"k": "b"}),
			}
			if err := tt.handle(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			for i, m := range msgs {
				if got := rec.Outcome(m.ID); got != tt.want[i] {
					t.Errorf("message %s: %v, want %v", m.ID, got, tt.want[i])
				}
			}
			var ops []string
			for _, c := range rec.Calls() {
				ops = append(ops, c.Op)
			}
			if !slices.Equal(ops, tt.calls) {
				t.Errorf("calls %v, want %v", ops, tt.calls)
			}
		})
	}
}

func TestRecorderMessageFields(t *testing.T) {
	rec := membertest.NewRecorder("orders")
	m := rec.Message(3, "5-1", map[string]string{"orderId": "42"})
	if m.StreamKey != "orders:3" || m.Shard != 3 || m.ID != "5-1" || m.Attempt != 1 {
		t.Fatalf("message %+v", m)
	}
	if v, ok := m.Field("orderId"); !ok || v != "42" {
		t.Fatalf("Field(orderId) = %q %v", v, ok)
	}
	if got := rec.IDs(membertest.Pending); !slices.Equal(got, []string{"5-1"}) {
		t.Fatalf("pending %v", got)
	}
}

func TestFailAcksLeavesRecordsUnsettled(t *testing.T) {
	ctx := context.Background()
	rec := membertest.NewRecorder("orders")
	m := rec.Message(0, "1-0", nil)
	rec.FailAcks(member.ErrFenced)
	if err := m.Ack(ctx); !errors.Is(err, member.ErrFenced) {
		t.Fatalf("Ack = %v, want ErrFenced", err)
	}
	if err := member.AckAll(ctx, []*member.Message{m}); !errors.Is(err, member.ErrFenced) {
		t.Fatalf("AckAll = %v, want ErrFenced", err)
	}
	if got := rec.Outcome(m.ID); got != membertest.Pending {
		t.Fatalf("outcome %v after failed acks, want pending", got)
	}
	rec.FailAcks(nil)
	if err := m.AckDel(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.Outcome(m.ID); got != membertest.AckDeleted {
		t.Fatalf("outcome %v, want ackdeleted", got)
	}
}

func TestMessagesOfTwoRecordersAreNotSettledTogether(t *testing.T) {
	a, b := membertest.NewRecorder("orders"), membertest.NewRecorder("orders")
	msgs := []*member.Message{a.Message(0, "1-0", nil), b.Message(0, "2-0", nil)}
	if err := member.AckAll(context.Background(), msgs); err == nil {
		t.Fatal("AckAll of two recorders' messages succeeded")
	}
	if a.Outcome("1-0") != membertest.Pending || b.Outcome("2-0") != membertest.Pending {
		t.Fatal("a refused AckAll settled something")
	}
}
