;; lists of lists: map of reverse, then append them all: (b a) (2 1) → b·a·2·1 via fold-left.
;; bind: a=0.7 b=1.3
(fold-left * 1.0 (apply append (map reverse (list (list a b) (list 1.0 2.0)))))
