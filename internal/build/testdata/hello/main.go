// Command hello is the smallest main package, for the build tests.
package main

func main() { println("hello") }
