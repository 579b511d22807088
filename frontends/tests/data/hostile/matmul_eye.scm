;; 10^9 multiply-adds: charged before the kernel runs, so the default 200M work budget refuses it
;; at once.
;; expect: E007
(matmul (eye 1000) (eye 1000))
