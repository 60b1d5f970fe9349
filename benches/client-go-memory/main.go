// Peak resident memory gained by client-go's workqueue with N distinct keys
// queued at once and no worker: the same case as ctrlkit-benches' memory
// binary (u64 keys, or 19-byte "ns-0000/pod-0000000" strings).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"k8s.io/client-go/util/workqueue"
)

func status(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), field) {
			v, _ := strconv.ParseUint(strings.Fields(s.Text())[1], 10, 64)
			return v * 1024
		}
	}
	panic(field)
}

func main() {
	items := flag.Uint64("items", 1000000, "distinct keys queued at once")
	keys := flag.String("keys", "u64", "u64 or string")
	flag.Parse()
	before := status("VmHWM:")
	var queued int
	switch *keys {
	case "u64":
		q := workqueue.NewTyped[uint64]()
		for i := uint64(0); i < *items; i++ {
			q.Add(i)
		}
		queued = q.Len()
	case "string":
		q := workqueue.NewTyped[string]()
		for i := uint64(0); i < *items; i++ {
			q.Add(fmt.Sprintf("ns-%04d/pod-%07d", i%10000, i))
		}
		queued = q.Len()
	default:
		panic(*keys)
	}
	after := status("VmHWM:")
	fmt.Printf("{\"impl\":\"client-go v0.36.3 workqueue\",\"keys\":%q,\"items\":%d,\"queued\":%d,\"peak_rss_before\":%d,\"peak_rss_after\":%d,\"peak_bytes_per_item\":%.1f}\n",
		*keys, *items, queued, before, after, float64(after-before)/float64(*items))
}
