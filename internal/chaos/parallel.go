package chaos

import "sync"

// parallel calls fn for 0..n-1 from workers goroutines: the checks read
// thousands of jobs and documents over HTTP, one request each.
func parallel(workers, n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
