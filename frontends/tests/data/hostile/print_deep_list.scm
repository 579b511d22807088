;; The program's result is a 50,000-deep nested list ((((…)))): printed on an explicit stack
;; (100,002 characters), well under the 1 MiB printing bound.
;; expect: ok
;; output_len: 100002
(loop ((i 0) (acc '()))
  (if (= i 50000) acc (recur (+ i 1) (list acc))))
