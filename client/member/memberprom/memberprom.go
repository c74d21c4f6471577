// Package memberprom exports a member Runtime's state and counters as
// Prometheus metrics. It lives apart from package member so that the
// member runtime does not depend on the Prometheus client.
//
//	reg.MustRegister(memberprom.New(rt))
//
// Every metric carries the stream and group as constant labels, and
// member (and shard) as variable ones. Values are read from
// [member.Runtime.Status] and [member.Runtime.Stats] at each scrape; the
// collector holds no state of its own and never blocks on I/O.
package memberprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rscoord/rscoord/client/member"
)

// Collector is a prometheus.Collector of one Runtime.
type Collector struct {
	rt *member.Runtime

	ready, state, owned, inFlight, lag           *prometheus.Desc
	handled, acked, nacked, handlerErrors, retry *prometheus.Desc
	deadLettered                                 *prometheus.Desc
}

// New returns a collector of rt's metrics.
func New(rt *member.Runtime) *Collector {
	constant := prometheus.Labels{"stream": rt.Stream(), "group": rt.Group()}
	shard := []string{"member", "shard"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("rscoord_member_"+name, help, labels, constant)
	}
	return &Collector{
		rt:            rt,
		ready:         d("ready", "1 while every logical member of the runtime is ACTIVE (joined, lease valid, Redis working).", nil),
		state:         d("state", "1 for the member's current state.", []string{"member", "state"}),
		owned:         d("shard_owned", "1 while the member owns the shard.", shard),
		inFlight:      d("shard_in_flight", "Records read and not finished (queued or in a handler).", shard),
		lag:           d("shard_lag", "Entries of the shard the group has not read yet, when known.", shard),
		handled:       d("records_handled_total", "Records whose handler calls are over.", shard),
		acked:         d("records_acked_total", "Records acknowledged (Ack, AckDel).", shard),
		nacked:        d("records_nacked_total", "Records left pending (Nack, or given up after handler failures).", shard),
		handlerErrors: d("handler_errors_total", "Failed handler calls.", shard),
		retry:         d("handler_retries_total", "Handler calls repeated in place.", shard),
		deadLettered:  d("records_dead_lettered_total", "Records moved to the dead-letter stream (WithDeadLetter).", shard),
	}
}

// Describe sends every metric description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ready, c.state, c.owned, c.inFlight, c.lag,
		c.handled, c.acked, c.nacked, c.handlerErrors, c.retry, c.deadLettered} {
		ch <- d
	}
}

// Collect sends the current values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.rt.Status()
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, b2f(st.Ready))
	for _, m := range st.Members {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, 1, m.MemberID, string(m.State))
	}
	for _, s := range c.rt.Stats() {
		labels := []string{s.MemberID, strconv.Itoa(s.Shard)}
		ch <- prometheus.MustNewConstMetric(c.owned, prometheus.GaugeValue, b2f(s.Owned), labels...)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight), labels...)
		if s.LagKnown {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(s.Lag), labels...)
		}
		ch <- prometheus.MustNewConstMetric(c.handled, prometheus.CounterValue, float64(s.Handled), labels...)
		ch <- prometheus.MustNewConstMetric(c.acked, prometheus.CounterValue, float64(s.Acked), labels...)
		ch <- prometheus.MustNewConstMetric(c.nacked, prometheus.CounterValue, float64(s.Nacked), labels...)
		ch <- prometheus.MustNewConstMetric(c.handlerErrors, prometheus.CounterValue, float64(s.HandlerErrors), labels...)
		ch <- prometheus.MustNewConstMetric(c.retry, prometheus.CounterValue, float64(s.Retries), labels...)
		ch <- prometheus.MustNewConstMetric(c.deadLettered, prometheus.CounterValue, float64(s.DeadLettered), labels...)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
