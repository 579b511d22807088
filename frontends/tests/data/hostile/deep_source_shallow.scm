;; 5,000 levels of (+ …) are within the depth limit: the value is 1.
;; generate: nested-plus 5000
;; expect: 1
