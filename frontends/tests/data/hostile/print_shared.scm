;; Printing a 60-level shared structure would write 2^60 characters: printing stops at 1 MiB
;; with a memory-limit error.
;; expect: E013
(loop ((i 0) (acc '()))
  (if (= i 60) acc (recur (+ i 1) (cons acc acc))))
