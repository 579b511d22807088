;; Both spellings of each boolean.
#t
#f
#true
#false
(if #t 1 #f)
