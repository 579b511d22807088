;;; bootstrap/prelude.scm: the list library, written in the language.
;;;
;;; `ndvm-search eval --prelude bootstrap/prelude.scm PROG` (and `calibrate --prelude`) puts these
;;; definitions before the program. A definition with the name of a native primitive (`map`,
;;; `append`, `length`, ...) replaces it for that program; the runtime keeps its native versions,
;;; which are faster (results/BENCHMARKS.md), and is what a program gets without --prelude. The
;;; rest (`assoc`, `member`, `list-tail`, `cadar`, ...) have no native twin.
;;;
;;; Every procedure is a `loop` or tail call where the result allows (`map`, `filter`, `append`,
;;; `fold-right` build in reverse, then reverse), so long lists run in constant depth.

;; ------------------------------------------------------------------ pairs

(define (caar x) (car (car x)))
(define (cadr x) (car (cdr x)))
(define (cdar x) (cdr (car x)))
(define (cddr x) (cdr (cdr x)))
(define (caaar x) (car (car (car x))))
(define (caadr x) (car (car (cdr x))))
(define (cadar x) (car (cdr (car x))))
(define (caddr x) (car (cdr (cdr x))))
(define (cdaar x) (cdr (car (car x))))
(define (cdadr x) (cdr (car (cdr x))))
(define (cddar x) (cdr (cdr (car x))))
(define (cdddr x) (cdr (cdr (cdr x))))
(define (cadddr x) (car (cdr (cdr (cdr x)))))
(define (cddddr x) (cdr (cdr (cdr (cdr x)))))

;; ------------------------------------------------------------------ lists

(define (length xs)
  (loop ((xs xs) (n 0))
    (if (null? xs) n (recur (cdr xs) (+ n 1)))))

(define (reverse xs)
  (loop ((xs xs) (acc '()))
    (if (null? xs) acc (recur (cdr xs) (cons (car xs) acc)))))

(define (list-tail xs k)
  (loop ((xs xs) (k k))
    (if (= k 0) xs (recur (cdr xs) (- k 1)))))

(define (list-ref xs k)
  (car (list-tail xs k)))

(define (last-pair xs)
  (loop ((xs xs))
    (if (pair? (cdr xs)) (recur (cdr xs)) xs)))

;; `xs` reversed onto `tail`.
(define (append-reverse xs tail)
  (loop ((xs xs) (acc tail))
    (if (null? xs) acc (recur (cdr xs) (cons (car xs) acc)))))

(define (append . lists)
  (if (null? lists)
      '()
      (loop ((rest (cdr (reverse lists))) (acc (car (reverse lists))))
        (if (null? rest)
            acc
            (recur (cdr rest) (append-reverse (reverse (car rest)) acc))))))

;; ------------------------------------------------------------------ higher order

(define (map1 f xs)
  (loop ((xs xs) (acc '()))
    (if (null? xs) (reverse acc) (recur (cdr xs) (cons (f (car xs)) acc)))))

(define (map2 f xs ys)
  (loop ((xs xs) (ys ys) (acc '()))
    (if (if (null? xs) #t (null? ys))
        (reverse acc)
        (recur (cdr xs) (cdr ys) (cons (f (car xs) (car ys)) acc)))))

;; `map` over one or more lists, as long as the shortest.
(define (map f xs . more)
  (cond ((null? more) (map1 f xs))
        ((null? (cdr more)) (map2 f xs (car more)))
        (else
         (loop ((lists (cons xs more)) (acc '()))
           (if (any-null? lists)
               (reverse acc)
               (recur (map1 cdr lists) (cons (apply f (map1 car lists)) acc)))))))

(define (any-null? lists)
  (loop ((ls lists))
    (cond ((null? ls) #f)
          ((null? (car ls)) #t)
          (else (recur (cdr ls))))))

(define (for-each f xs)
  (loop ((xs xs))
    (if (null? xs) '() (begin (f (car xs)) (recur (cdr xs))))))

(define (filter keep? xs)
  (loop ((xs xs) (acc '()))
    (cond ((null? xs) (reverse acc))
          ((keep? (car xs)) (recur (cdr xs) (cons (car xs) acc)))
          (else (recur (cdr xs) acc)))))

(define (fold-left f acc xs)
  (loop ((acc acc) (xs xs))
    (if (null? xs) acc (recur (f acc (car xs)) (cdr xs)))))

(define (fold f acc xs)
  (fold-left f acc xs))

(define (fold-right f acc xs)
  (fold-left (lambda (a x) (f x a)) acc (reverse xs)))

;; ------------------------------------------------------------------ search

(define (member-by same? x xs)
  (loop ((xs xs))
    (cond ((null? xs) #f)
          ((same? x (car xs)) xs)
          (else (recur (cdr xs))))))

(define (member x xs) (member-by equal? x xs))
(define (memv x xs) (member-by eqv? x xs))
(define (memq x xs) (member-by eq? x xs))

(define (assoc-by same? key alist)
  (loop ((al alist))
    (cond ((null? al) #f)
          ((same? key (car (car al))) (car al))
          (else (recur (cdr al))))))

(define (assoc key alist) (assoc-by equal? key alist))
(define (assv key alist) (assoc-by eqv? key alist))
(define (assq key alist) (assoc-by eq? key alist))
